#!/usr/bin/env python3
"""Tests of scripts/code-order.py's parsing and file handling (`make check` and `make test` run them): the parts that
decide what the ordering file says, fed with lines as perf and llvm-profdata print them."""
import importlib.util
import os
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("code_order", os.path.join(HERE, "code-order.py"))
code_order = importlib.util.module_from_spec(spec)
spec.loader.exec_module(code_order)


class Parsing(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.exe = os.path.join(self.folder.name, "iap-worker")
        open(self.exe, "w").close()
        # perf prints the path the process mapped: a symlink to the executable is the executable.
        self.link = os.path.join(self.folder.name, "link-to-worker")
        os.symlink(self.exe, self.link)

    def tearDown(self):
        self.folder.cleanup()

    def test_samples_count_the_executables_functions_alone(self):
        text = "\n".join([
            f"     55b58c5709ae $s4Wire8JSONTextO6appendyyF+0x1e ({self.exe})",
            f"     55b58c5709b0 $s4Wire8JSONTextO6appendyyF ({self.link})",
            f"     55b58c5709c0 swift_retain@plt ({self.exe})",
            f"     55b58c5709d0 [unknown] ({self.exe})",
            "     7f3f642b4c98 sysmalloc (/usr/lib/x86_64-linux-gnu/libc.so.6)",
            "not a sample line",
        ])
        self.assertEqual(code_order.parse_samples(text, self.exe), {"$s4Wire8JSONTextO6appendyyF": 2})

    def test_faults_name_the_instruction_and_count_code_pages_when_the_address_is_the_instruction(self):
        text = "\n".join([
            # A data fault on the heap: the function ran, but no code page of it faulted.
            f"    7f9bc87da8e8 [unknown] (//anon)     55b58c5709ae $s4GRDB3SQLV3sqlySSF+0x2e ({self.exe})",
            # The data address's mapping holds parentheses of its own.
            f"    7f9bc87da8e8 [unknown] (/x (deleted))     55b58c5709ae $s4GRDB3SQLV3sqlySSF ({self.exe})",
            # An instruction fetch: the address is the instruction's.
            f"    55b58d54b770 $s4Engine3runyyF ({self.exe})     55b58d54b770 $s4Engine3runyyF ({self.exe})",
            "    7f3f3a057000 [unknown] (//anon)     7f3f6438bb75 __memmove_avx512 (/usr/lib/libc.so.6)",
        ])
        ran, code = code_order.parse_faults(text, self.exe)
        self.assertEqual(ran, {"$s4GRDB3SQLV3sqlySSF": 2, "$s4Engine3runyyF": 1})
        self.assertEqual(code, 1)

    def test_profile_counts_functions_that_ran_by_their_symbol(self):
        text = "\n".join([
            "Counters:",
            "  $s4Wire8JSONTextO6appendyyF:",
            "    Hash: 0x0000000000000000",
            "    Counters: 3",
            "    Function count: 1234",
            "  /src/Sources/Ledger/Store.swift:$s6Ledger5StoreV4readyyF:",
            "    Hash: 0x0000000000000001",
            "    Counters: 1",
            "    Function count: 7",
            "  scrypt.cc:_ZL9xor_blockP7block_t:",
            "    Counters: 2",
            "    Function count: 0",
            "  $s4Wire8JSONTextO6appendyyF:",
            "    Function count: 99",
            "Instrumentation level: Front-end",
        ])
        self.assertEqual(
            code_order.parse_profile(text), {"$s4Wire8JSONTextO6appendyyF": 1234, "$s6Ledger5StoreV4readyyF": 7})


class Ordering(unittest.TestCase):
    def test_each_function_is_followed_by_its_pieces_once(self):
        present = {"$s1A3runyyYaF", "$s1A3runyyYaFTY0_", "$s1A3runyyYaFTQ1_", "$s1A3runyyYaFTA.190",
                   "$s1B3getSivr.resume.0", "$s1B3getSivr", "$s1C1fyyF", "$s1C1fyyFTm"}
        order = code_order.with_pieces(["$s1A3runyyYaF", "$s1B3getSivr", "$s1C1fyyF"], present, known={"$s1C1fyyFTm"})
        self.assertEqual(order, [
            "$s1A3runyyYaF", "$s1A3runyyYaFTA.190", "$s1A3runyyYaFTQ1_", "$s1A3runyyYaFTY0_",
            "$s1B3getSivr", "$s1B3getSivr.resume.0",
            "$s1C1fyyF",
        ])
        self.assertEqual(len(order), len(set(order)))

    def test_runtime_helpers_are_swift_symbols_only(self):
        self.assertTrue(code_order.RUNTIME_HELPER.search("$s4GRDB8DatabaseCMa"))
        self.assertIsNone(code_order.RUNTIME_HELPER.search("$sSaySSGWOcTm"))  # a merged copy, ordered as a piece
        self.assertIsNone(code_order.RUNTIME_HELPER.search("sigma"))


class Files(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.folder.name, "order")

    def tearDown(self):
        self.folder.cleanup()

    def test_a_write_that_fails_leaves_the_previous_file_whole_and_nothing_beside_it(self):
        code_order.write(["$s1A1fyyF", "$s1B1gyyF"], out=self.out)

        def failing():
            yield "$s1C1hyyF"
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            code_order.write(failing(), out=self.out)
        self.assertEqual(code_order.listed(out=self.out), ["$s1A1fyyF", "$s1B1gyyF"])
        self.assertEqual(os.listdir(self.folder.name), ["order"])

    def test_a_relink_that_links_nothing_stops_the_rounds(self):
        release = os.path.join(self.folder.name, "iap-worker")
        open(release, "w").close()
        time.sleep(0.01)
        code_order.write(["$s1A1fyyF"], out=self.out)
        with self.assertRaises(SystemExit) as stopped:
            code_order.relink_checked("true", release, out=self.out)
        self.assertIn("did not link", str(stopped.exception.code))
        code_order.relink_checked(f"touch '{release}'", release, out=self.out)


if __name__ == "__main__":
    unittest.main()
