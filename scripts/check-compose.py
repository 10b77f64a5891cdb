"""Checks that every address a compose service is configured to call is one that a service listens on, and that
every service running the project's image runs a command its executable has.

    check-compose.py [deploy/compose.yaml]

The file is first normalised by `docker-compose config` (anchors, merges, relative paths resolved). Then, for
every service, the addresses it is told to call are collected from its environment values and its command
(and entrypoint), plus the Prometheus scrape targets and Grafana datasource URLs of the configuration files
bind-mounted into it: `scheme://host:port` URLs and bare `host:port` pairs. Each address must name a service
of the file that is configured to listen on that port on a non-loopback address:

- a service built from deploy/Dockerfile (or using its image, iap-worker:* or iap-worker-dev:*) runs the executable
  of the Dockerfile's stage it builds (`build.target`, else the last stage; the image iap-worker-dev:* is the `dev`
  stage), read from that stage's ENTRYPOINT: `iap-worker run` listens on 0.0.0.0 at SERVER_PORT or
  config/iap-worker.yaml's server.port; `iap-dev gamebase-sim --host H --port P` where it says (the defaults are
  read from Sources/iap-dev/GamebaseSimCommand.swift); with no command, the stage's CMD applies. A command the
  executable does not have (the development tools are iap-dev's since the executables were split: the image's
  iap-worker has no gamebase-sim) is an error;
- other images are known by the small table LISTENERS below (unless the service replaces their entrypoint).

A call to localhost or 127.x from a service's environment or command is an error too: inside a container
that is the container itself. Hosts with a dot (external names, topic:partition specs) are not checked.
Healthchecks are not read (they run inside the service's own container).
"""
import json
import pathlib
import re
import shlex
import subprocess
import sys
import urllib.parse

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
ALL_INTERFACES = "0.0.0.0"


def loopback(host):
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")


# --- listeners ---------------------------------------------------------------------------------------------------

def swift_default(source, name, kind):
    """The default of `var NAME: KIND = VALUE` in an ArgumentParser command, so the table follows the code."""
    match = re.search(rf"var {name}: {kind} = (\S+)", source)
    if not match:
        sys.exit(f"check-compose: no default for --{name} in GamebaseSimCommand.swift; update this script")
    return json.loads(match.group(1).replace("_", ""))


sim_source = (root / "Sources/iap-dev/GamebaseSimCommand.swift").read_text()
SIM_DEFAULT_HOST = swift_default(sim_source, "host", "String")
SIM_DEFAULT_PORT = swift_default(sim_source, "port", "Int")
CONFIG_SERVER_PORT = int(yaml.safe_load((root / "config/iap-worker.yaml").read_text())["server"]["port"])


def commands_of(executable):
    """The top-level command names of an executable: its @main command's `subcommands:` list, each type's
    `commandName:`, so the table follows the code."""
    folder = root / "Sources" / executable
    sources = {path: path.read_text() for path in sorted(folder.glob("*.swift"))}
    main = next((text for text in sources.values() if re.search(r"^@main", text, re.M)), "")
    listed = re.search(r"subcommands:\s*\[([^\]]*)\]", main)
    if not listed:
        sys.exit(f"check-compose: no subcommands in Sources/{executable}'s @main command; update this script")
    names = set()
    for type_name in re.findall(r"(\w+)\.self", listed.group(1)):
        for text in sources.values():
            match = re.search(rf"struct {type_name}\b.*?commandName:\s*\"([^\"]+)\"", text, re.S)
            if match:
                names.add(match.group(1))
                break
        else:
            sys.exit(f"check-compose: no commandName for {type_name} in Sources/{executable}; update this script")
    return names


COMMANDS = {executable: commands_of(executable) for executable in ("iap-worker", "iap-dev")}


def dockerfile_stages(text):
    """{stage name: (entrypoint, cmd)} of a Dockerfile, a stage inheriting what its FROM stage set; and the name
    of the last stage (the default target). Exec-form (JSON) ENTRYPOINT and CMD only."""
    stages, current, last, cmd_here = {}, None, None, False
    for line in re.sub(r"\\\n", " ", text).splitlines():
        words = line.strip().split(None, 1)
        if not words or words[0].startswith("#"):
            continue
        instruction, rest = words[0].upper(), (words[1] if len(words) > 1 else "")
        if instruction == "FROM":
            match = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            base, name = match.group(1), match.group(2) or f"#{len(stages)}"
            stages[name] = stages.get(base, (None, None))
            current, last, cmd_here = name, name, False
        elif instruction in ("ENTRYPOINT", "CMD") and current is not None:
            value = json.loads(rest)
            entrypoint, cmd = stages[current]
            if instruction == "CMD":
                stages[current], cmd_here = (entrypoint, value), True
            else:  # an ENTRYPOINT resets a CMD inherited from the base, as docker does
                stages[current] = (value, cmd if cmd_here else None)
    return stages, last


DOCKERFILE_STAGES, DOCKERFILE_DEFAULT = dockerfile_stages((root / "deploy/Dockerfile").read_text())
# Images compose.yaml names for the Dockerfile's targets.
IMAGE_STAGES = {"iap-worker": DOCKERFILE_DEFAULT, "iap-worker-dev": "dev"}


def option(args, name, default):
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return default


def dockerfile_stage(service):
    """The stage of deploy/Dockerfile a service runs: its build target, or the one its image names."""
    build = service.get("build") or {}
    if build.get("dockerfile", "").endswith("deploy/Dockerfile"):
        return build.get("target") or DOCKERFILE_DEFAULT
    return IMAGE_STAGES.get(service.get("image", "").rsplit("/", 1)[-1].split(":")[0])


def executable_and_args(service):
    """(executable, arguments) of a service running deploy/Dockerfile's image, or (None, [])."""
    stage = dockerfile_stage(service)
    if stage not in DOCKERFILE_STAGES:
        return None, []
    entrypoint, cmd = DOCKERFILE_STAGES[stage]
    if service.get("entrypoint") is not None:  # compose's entrypoint replaces the image's, and its CMD with it
        entrypoint, cmd = as_list(service.get("entrypoint")), None
    executable = pathlib.PurePosixPath(entrypoint[0]).name if entrypoint else None
    args = (entrypoint or [])[1:] + (as_list(service.get("command")) or cmd or [])
    return executable, args


def iap_worker_listeners(service):
    executable, args = executable_and_args(service)
    if not args:
        return []
    if executable == "iap-dev" and args[0] == "gamebase-sim":
        return [(option(args, "--host", SIM_DEFAULT_HOST), int(option(args, "--port", SIM_DEFAULT_PORT)))]
    if executable == "iap-worker" and args[0] == "run":  # AdminServer binds 0.0.0.0 on server.port
        port = (service.get("environment") or {}).get("SERVER_PORT", CONFIG_SERVER_PORT)
        return [(ALL_INTERFACES, int(port))]
    return []  # other commands (reprocess, ledger, dev-kafka, ...) serve nothing another container reaches


def command_failures(services):
    """Services that run a command their image's executable does not have."""
    failures = []
    for name, service in sorted(services.items()):
        if not runs_iap_worker(service):
            continue
        executable, args = executable_and_args(service)
        if executable not in COMMANDS:
            failures.append(f"service {name} runs deploy/Dockerfile's stage {dockerfile_stage(service)!r}, whose "
                            f"entrypoint is neither iap-worker nor iap-dev")
        elif args and not args[0].startswith("-") and args[0] not in COMMANDS[executable]:
            elsewhere = [other for other, commands in COMMANDS.items() if args[0] in commands]
            hint = (f"; it is {elsewhere[0]}'s: build the Dockerfile's dev target (build.target: dev)"
                    if elsewhere == ["iap-dev"] else "")
            failures.append(f"service {name} runs `{executable} {args[0]}`, which {executable} does not have{hint}")
    return failures


def kafka_listeners(service):
    """apache/kafka: KAFKA_LISTENERS (NAME://host:port,...), an empty host meaning every interface."""
    value = (service.get("environment") or {}).get("KAFKA_LISTENERS", "PLAINTEXT://:9092")
    listeners = []
    for listener in str(value).split(","):
        host, _, port = listener.split("://", 1)[-1].rpartition(":")
        listeners.append((host or ALL_INTERFACES, int(port)))
    return listeners


def flag_port(flag, default):
    def listeners(service):
        address = option(as_list(service.get("command")), flag, default)
        host, _, port = address.rpartition(":")
        return [(host or ALL_INTERFACES, int(port))]
    return listeners


def env_port(variable, default):
    return lambda service: [(ALL_INTERFACES, int((service.get("environment") or {}).get(variable, default)))]


# Well-known images, by the last part of the image name: where they listen.
LISTENERS = {
    "kafka": kafka_listeners,
    "postgres": env_port("PGPORT", 5432),
    "prometheus": flag_port("--web.listen-address", ":9090"),
    "grafana": env_port("GF_SERVER_HTTP_PORT", 3000),
}


def runs_iap_worker(service):
    return dockerfile_stage(service) is not None


def listeners_of(service):
    if runs_iap_worker(service):
        return iap_worker_listeners(service)
    if service.get("entrypoint"):
        return []  # the image's server is not what runs (the kafka image as a topic-creating step, say)
    image = service.get("image", "").rsplit("/", 1)[-1].split(":")[0]
    return LISTENERS[image](service) if image in LISTENERS else []


# --- calls -------------------------------------------------------------------------------------------------------

URL = re.compile(r"\b[a-zA-Z][\w+.-]*://[^\s'\",;]+")
HOST_PORT = re.compile(r"(?<![\w.:/-])(?:[^\s@'\"/]+@)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9][\w.-]*):(\d{1,5})(?![\w.:])")


def as_list(value):
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def addresses(text):
    """(host, port) pairs in a piece of configuration: URLs first (so user:password@ never reads as an address),
    then bare host:port."""
    found = []
    for match in URL.finditer(text):
        parsed = urllib.parse.urlsplit(match.group(0))
        try:
            port = parsed.port
        except ValueError:
            port = None
        if parsed.hostname and port:
            found.append((parsed.hostname, port))
    for match in HOST_PORT.finditer(URL.sub(" ", text)):
        found.append((match.group(1), int(match.group(2))))
    return found


def mounted_files(service):
    """Host files and folders bind-mounted into the service (docker-compose config made their paths absolute)."""
    for volume in service.get("volumes") or []:
        source = volume.get("source") if isinstance(volume, dict) else volume.split(":")[0]
        if source and source.startswith("/"):
            path = pathlib.Path(source)
            if path.is_dir():
                yield from (p for p in sorted(path.rglob("*")) if p.is_file())
            elif path.is_file():
                yield path


def config_file_calls(path):
    """Scrape targets of a Prometheus configuration and datasource URLs of Grafana provisioning."""
    if path.suffix not in (".yml", ".yaml"):
        return []
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return []
    if not isinstance(document, dict):
        return []
    found = []
    for job in document.get("scrape_configs") or []:
        for static in job.get("static_configs") or []:
            for target in static.get("targets") or []:
                found += [(f"{path.name}: scrape target", host, port) for host, port in addresses(target)]
        for alerting in (document.get("alerting") or {}).get("alertmanagers") or []:
            for static in alerting.get("static_configs") or []:
                for target in static.get("targets") or []:
                    found += [(f"{path.name}: alertmanager", host, port) for host, port in addresses(target)]
    for datasource in document.get("datasources") or []:
        found += [(f"{path.name}: datasource url", h, p) for h, p in addresses(str(datasource.get("url", "")))]
    return found


def calls_of(service):
    found = []
    for name, value in (service.get("environment") or {}).items():
        found += [(f"environment {name}", host, port) for host, port in addresses(str(value))]
    for key in ("entrypoint", "command"):
        for arg in as_list(service.get(key)):
            found += [(key, host, port) for host, port in addresses(arg)]
    for path in mounted_files(service):
        found += config_file_calls(path)
    return found


def check(compose_file):
    rendered = subprocess.run(
        ["docker-compose", "-f", str(compose_file), "config"], check=True, capture_output=True, text=True).stdout
    services = yaml.safe_load(rendered)["services"]
    listening = {name: listeners_of(service) for name, service in services.items()}
    failures, checked = command_failures(services), 0
    for name, service in sorted(services.items()):
        for where, host, port in calls_of(service):
            if "." in host.strip("[]") and not loopback(host):
                continue  # an external name or a topic:partitions spec
            checked += 1
            what = f"service {name} ({where}) calls {host}:{port}"
            if loopback(host):
                failures.append(f"{what}: that is the container's own loopback; call a service by its name")
            elif host not in services:
                failures.append(f"{what}: there is no service {host}")
            elif not any(p == port for _, p in listening[host]):
                ports = ", ".join(f"{h}:{p}" for h, p in listening[host]) or "nothing this check knows"
                failures.append(f"{what}: {host} listens on {ports}")
            elif not any(p == port and not loopback(h) for h, p in listening[host]):
                failures.append(f"{what}: {host} listens on port {port} on loopback only, unreachable from {name}")
    return checked, failures


if __name__ == "__main__":
    compose = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else root / "deploy/compose.yaml")
    checked, failures = check(compose)
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    if failures or checked == 0:
        sys.exit(f"{compose}: {len(failures)} failure(s); {checked} service addresses checked")
    print(f"ok  {compose} ({checked} service addresses, each listened on)")
