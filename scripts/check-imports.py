#!/usr/bin/env python3
"""Keeps the module graph's arrows pointing inward (docs/architecture.md). Standard library only.

    scripts/check-imports.py

For every target of Package.swift that has Swift sources (Sources/<name>, or the target's `path:`), reads the
`import` lines — with `@testable`, `@preconcurrency`, `public`/`package`/`internal`, `import struct X.Y`;
`import X.Sub` counts as X — that name one of this package's own modules, and checks:

- each import is in the target's entry of ALLOWED below (what it may import of our own modules);
- each of the target's dependencies in Package.swift is in that entry too (a dependency is a link, used or not);
- each import is a direct dependency in Package.swift (one that only builds because another dependency brings
  the module along breaks as soon as that other dependency goes);
- `CRdKafka.Mock` (librdkafka's mock cluster) is imported by KafkaTesting alone (Sources and Tests);
- the `iap-worker` executable links none of the test rig, also through other targets;
- every non-test target of Package.swift has an entry in ALLOWED, and every entry names a target;
- the core modules (CORE_PRODUCTS) link no other package's module beyond their entry, through any of our targets;
- an import of another package's module (one some target lists as a product) is a declared product dependency.

Prints each violation as `Sources/X/File.swift:LINE: X may not import Y (allowed: …)` (or `Package.swift:LINE: …`)
and exits 1; prints one ok line otherwise. Test targets (Tests/*Tests) are not checked, except for CRdKafka.Mock.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent

# --- the intended graph --------------------------------------------------------------------------------------------

# The production modules, the test rig (iap-dev and the tests only; never the image), the tests' shared support.
PRODUCTION = {
    "Wire", "Gamebase", "Stores", "Fulfilment", "Engine", "CRdKafka", "Kafka", "GamebaseHTTP", "AppStoreHTTP",
    "GooglePlayHTTP", "Ledger", "Lookup", "Console",
    "EventTail", "App", "RunAtLoad",
}
TEST_RIG = {
    "KafkaTesting", "GamebaseSimulator", "AppStoreSimulator", "GooglePlaySimulator", "SimulatorServer", "Sandbox",
    "InMemoryLedger",
}
# librdkafka's C API is seen by the Kafka module (and the mock cluster's wrapper) alone.
C_BOUNDARY = {"CRdKafka"}

ALLOWED = {
    # The core: Foundation, Wire's readers and the Gamebase port; no NIO, no SQL driver, no librdkafka.
    "Wire": set(),
    "Gamebase": {"Wire"},
    # The stores' notification formats and Apple's JWS verification: pure, no I/O.
    "Stores": {"Fulfilment", "Wire"},
    "Fulfilment": {"Gamebase", "Wire"},
    # The engine and the background services see the core's ports and an injected clock, never an adapter.
    "Engine": {"Fulfilment", "Gamebase", "Wire"},
    # Adapters: each implements a port of the core (or, for Kafka, is the librdkafka client the App adapts).
    "CRdKafka": set(),
    "Kafka": {"CRdKafka"},
    "GamebaseHTTP": {"Gamebase", "Wire"},
    "Ledger": {"Fulfilment", "Wire"},
    "AppStoreHTTP": {"Fulfilment", "Wire"},
    "GooglePlayHTTP": {"Fulfilment", "Wire"},
    # Surfaces for people, over the core's read ports; never the engine's state or an adapter's internals.
    "Lookup": {"Fulfilment", "Gamebase", "Wire"},
    "Console": {"Fulfilment", "Gamebase", "Lookup", "Wire"},
    "EventTail": {"Fulfilment", "Gamebase", "Kafka", "Wire"},
    # The one composition root, and the operator's executable: anything production, no test rig, no C.
    "App": PRODUCTION - {"App"} - C_BOUNDARY,
    "iap-worker": PRODUCTION - C_BOUNDARY,
    # What `iap-worker run` sets up at load, the hold of SIGTERM and SIGINT and the malloc arena limit, and the pass
    # that gives freed memory back (C: a constructor runs before Swift's runtime, and glibc's malloc_trim is C only).
    "RunAtLoad": set(),
    # The test rig and the development executable.
    "KafkaTesting": {"Kafka", "CRdKafka"},
    "SimulatorServer": {"Wire"},
    "GamebaseSimulator": {"Gamebase", "SimulatorServer", "Wire"},
    "AppStoreSimulator": {"SimulatorServer", "Stores", "Wire"},
    "GooglePlaySimulator": {"SimulatorServer", "Wire"},
    # The memory ledger: every role over tables in memory (the tests' and the fuzz targets' ledger).
    "InMemoryLedger": {"Fulfilment", "Wire"},
    "Sandbox": (PRODUCTION | TEST_RIG) - {"Sandbox"} - C_BOUNDARY,
    "iap-dev": (PRODUCTION | TEST_RIG) - C_BOUNDARY,
    # The tests' shared fakes of the ports (a scripted Gamebase, a clock, recorders) and store factories.
    "IAPTestSupport": {"Wire", "Gamebase", "Fulfilment", "Engine", "Ledger", "InMemoryLedger"},
    # The whole worker in process and as processes, for the system tiers (end to end, process, broker, browser).
    "SystemTestSupport": (PRODUCTION | TEST_RIG | {"IAPTestSupport"}) - C_BOUNDARY,
}
# The other packages' modules the core may link (through any of its targets): pure Swift, no NIO, no SQL driver, no C
# client. Every other target may link what Package.swift gives it.
CORE_PRODUCTS = {
    "Wire": {"Crypto"},
    "Stores": {"Crypto", "Logging", "X509", "SwiftASN1"},
    "Gamebase": {"Crypto"},
    "Fulfilment": {"Crypto", "Logging"},
    "Engine": {"Crypto", "Logging", "ServiceLifecycle", "DequeModule"},
}
# Who may import the mock cluster's header module.
MOCK_SUBMODULE = "CRdKafka.Mock"
MOCK_IMPORTERS = {"KafkaTesting"}
# The shipped executable: its whole link closure must stay clear of these.
SHIPPED = "iap-worker"
NEVER_SHIPPED = TEST_RIG | {"IAPTestSupport", "SystemTestSupport", "iap-dev"}

# --- Package.swift -------------------------------------------------------------------------------------------------


def skip_literal_or_comment(text, i):
    """If a string literal or comment starts at i, the index just past it; else i."""
    if text.startswith('"""', i):
        end = text.find('"""', i + 3)
        return len(text) if end < 0 else end + 3
    if text[i] == '"':
        j = i + 1
        while j < len(text) and text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    return i


def closing(text, start):
    """The index of the bracket closing the one at start, literals and comments skipped."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    i = start
    while i < len(text):
        j = skip_literal_or_comment(text, i)
        if j != i:
            i = j
            continue
        c = text[i]
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i
        i += 1
    sys.exit(f"check-imports: Package.swift: unbalanced bracket at offset {start}; update this script")


def top_level_items(text, start, end):
    """(offset, text) of the comma-separated items of the bracketed list text[start:end] (start at the bracket)."""
    items, i, item_start = [], start + 1, start + 1
    while i < end:
        j = skip_literal_or_comment(text, i)
        if j != i:
            i = j
            continue
        if text[i] in "([{":
            i = closing(text, i) + 1
            continue
        if text[i] == ",":
            items.append((item_start, text[item_start:i]))
            item_start = i + 1
        i += 1
    items.append((item_start, text[item_start:end]))
    return [(offset, item) for offset, item in items if re.sub(r"//[^\n]*|/\*.*?\*/", "", item, flags=re.S).strip()]


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def read_package():
    """{name: {kind, folder, dependencies: {module: line in Package.swift}}} of every target."""
    text = (root / "Package.swift").read_text()
    package = re.search(r"\bPackage\s*\(", text)
    if not package:
        sys.exit("check-imports: Package.swift has no `Package(`; update this script")
    arguments = top_level_items(text, package.end() - 1, closing(text, package.end() - 1))
    targets_key = next(((offset, item) for offset, item in arguments if re.match(r"\s*targets\s*:", item)), None)
    if not targets_key:
        sys.exit("check-imports: Package(...) has no `targets:` argument; update this script")
    open_bracket = text.index("[", targets_key[0])
    targets = {}
    for offset, item in top_level_items(text, open_bracket, closing(text, open_bracket)):
        head = re.match(r"\s*(?://[^\n]*\n\s*)*\.(\w+)\s*\(", item)
        if not head:
            continue
        kind = head.group(1)
        name = re.search(r'\bname\s*:\s*"([^"]+)"', item).group(1)
        path = re.search(r'\bpath\s*:\s*"([^"]+)"', item)
        folder = path.group(1) if path else f"{'Tests' if kind == 'testTarget' else 'Sources'}/{name}"
        dependencies, products = {}, {}
        key = re.search(r"\bdependencies\s*:\s*\[", item)
        if key:
            start = offset + key.end() - 1
            end = closing(text, start)
            for dep_offset, dep in top_level_items(text, start, end):
                dep = dep.strip()
                if dep.startswith(".product"):
                    # Another package's product: its module has the product's name.
                    product = re.search(r'\bname\s*:\s*"([^"]+)"', dep)
                    if product:
                        position = dep_offset + text[dep_offset:end].find(product.group(0))
                        products[product.group(1)] = line_of(text, position)
                    continue
                literal = re.search(r'"([^"]+)"', dep)
                if literal:
                    position = dep_offset + text[dep_offset:end].find(literal.group(0))
                    dependencies[literal.group(1)] = line_of(text, position)
        targets[name] = {"kind": kind, "folder": folder, "dependencies": dependencies, "products": products}
    if not targets:
        sys.exit("check-imports: found no targets in Package.swift; update this script")
    return targets


# --- imports -------------------------------------------------------------------------------------------------------

IMPORT = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?(?:@\w+\s+)*import\s+"
    r"(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


def imports(path):
    """(line number, full module path) of each import statement, outside block comments and multi-line strings."""
    found, in_comment, in_string = [], False, False
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if in_comment:
            if "*/" in line:
                in_comment = False
            continue
        if in_string:
            if line.count('"""') % 2 == 1:
                in_string = False
            continue
        # `/* … */ import X` and `…; import X` import too.
        statements = re.sub(r"/\*.*?\*/", " ", line).split(";")
        matches = [m for m in (IMPORT.match(statement) for statement in statements) if m]
        if matches:
            found.extend((number, m.group(1)) for m in matches)
            continue
        code = line.split("//", 1)[0]
        if code.count('"""') % 2 == 1:
            in_string = True
        elif "/*" in code and "*/" not in code[code.index("/*"):]:
            in_comment = True
    return found


def closure(targets, name):
    """Every target name reaches through Package.swift's dependencies, with the first path to each."""
    paths, queue = {name: [name]}, [name]
    while queue:
        current = queue.pop(0)
        for dep in targets.get(current, {}).get("dependencies", {}):
            if dep in targets and dep not in paths:
                paths[dep] = paths[current] + [dep]
                queue.append(dep)
    return paths


def main():
    targets = read_package()
    ours = set(targets)
    all_products = {product for target in targets.values() for product in target["products"]}
    violations = []

    def allowed_text(name):
        return ", ".join(sorted(ALLOWED[name])) or "none of our modules"

    for name in sorted(set(ALLOWED) - ours):
        violations.append(f"scripts/check-imports.py: ALLOWED names {name}, which is no target of Package.swift")
    checked_targets, checked_imports, checked_files = 0, 0, 0
    for name, target in sorted(targets.items()):
        if target["kind"] == "testTarget":
            continue
        if name not in ALLOWED:
            violations.append(
                f"Package.swift: target {name} has no entry in scripts/check-imports.py's ALLOWED: say what it may import")
            continue
        checked_targets += 1
        for dep, line in sorted(target["dependencies"].items()):
            if dep in ours and dep not in ALLOWED[name]:
                violations.append(
                    f"Package.swift:{line}: {name} may not depend on {dep} (allowed: {allowed_text(name)})")
        if name in CORE_PRODUCTS:
            for member in closure(targets, name):
                for product, line in sorted(targets.get(member, {}).get("products", {}).items()):
                    if product not in CORE_PRODUCTS[name]:
                        via = "" if member == name else f" (through {member})"
                        violations.append(
                            f"Package.swift:{line}: the core module {name} may not link {product}{via} (allowed: "
                            f"{', '.join(sorted(CORE_PRODUCTS[name])) or 'no other package'})")
        folder = root / target["folder"]
        if not folder.is_dir():
            # A target whose folder this script cannot find would be checked over no file and pass.
            violations.append(f"Package.swift: target {name} has no folder {target['folder']}; update this script")
            continue
        for path in sorted(folder.rglob("*.swift")):
            checked_files += 1
            where = path.relative_to(root)
            for line, module_path in imports(path):
                module = module_path.split(".")[0]
                if module in all_products and module not in target["products"]:
                    violations.append(
                        f"{where}:{line}: {name} imports {module}, which Package.swift does not list among {name}'s "
                        f"dependencies (another package's product; it builds only while something else brings it)")
                    continue
                if module not in ours or module == name:
                    continue
                checked_imports += 1
                if module not in ALLOWED[name]:
                    violations.append(f"{where}:{line}: {name} may not import {module} (allowed: {allowed_text(name)})")
                elif module not in target["dependencies"]:
                    violations.append(
                        f"{where}:{line}: {name} imports {module}, which Package.swift does not list among {name}'s "
                        f"dependencies (it builds only while another dependency brings it along)")

    # The mock cluster's header, in Sources and Tests alike.
    for folder in ("Sources", "Tests"):
        for path in sorted((root / folder).rglob("*.swift")):
            parts = path.relative_to(root).parts
            owner = parts[1] if len(parts) > 2 else ""
            for line, module_path in imports(path):
                if module_path == MOCK_SUBMODULE and owner not in MOCK_IMPORTERS:
                    violations.append(
                        f"{path.relative_to(root)}:{line}: {owner} may not import {MOCK_SUBMODULE} "
                        f"(allowed: {', '.join(sorted(MOCK_IMPORTERS))} only; use KafkaTesting's MockCluster)")

    # What the shipped executable links, through any chain of targets.
    if SHIPPED in targets:
        for module, chain in sorted(closure(targets, SHIPPED).items()):
            if module in NEVER_SHIPPED:
                violations.append(f"Package.swift: {SHIPPED} links {module} (through {' -> '.join(chain)})")

    for violation in violations:
        print(violation)
    if violations:
        print(f"check-imports: {len(violations)} violation(s); the intended graph is in docs/architecture.md",
              file=sys.stderr)
        return 1
    print(f"ok  check-imports: {checked_imports} imports of our modules in {checked_files} files of "
          f"{checked_targets} targets, each allowed and declared; Package.swift agrees; {SHIPPED} links no test rig")
    return 0


if __name__ == "__main__":
    sys.exit(main())
