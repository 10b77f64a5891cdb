#!/usr/bin/env python3
"""Tests of scripts/check-release-flags.py: the Dockerfiles it must refuse, each a way the image's build could drift
from `make release` unnoticed. Run by `make check` and `make test`."""
import importlib.util
import pathlib
import unittest

root = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_release_flags", root / "scripts/check-release-flags.py")
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

MAKEFILE = (root / "Makefile").read_text()
DOCKERFILE = (root / "deploy/Dockerfile").read_text()
WORKER_BUILD = "swift build -c release --product iap-worker --static-swift-stdlib $RELEASE_FLAGS"


def problems(dockerfile: str) -> list[str]:
    flags, wrong = check.dockerfile_flags(dockerfile)
    if flags != check.makefile_flags(MAKEFILE):
        wrong = ["RELEASE_FLAGS differ", *wrong]
    return wrong


class CheckReleaseFlagsTests(unittest.TestCase):
    def test_the_repositorys_files_agree(self):
        self.assertEqual(problems(DOCKERFILE), [])

    def test_a_flag_left_out_is_refused(self):
        self.assertIn("RELEASE_FLAGS differ", problems(DOCKERFILE.replace("-Xswiftc -use-ld=lld ", "", 1)))

    def test_a_continuation_without_its_space_joins_two_flags_as_docker_does(self):
        # Docker joins "…lld\\" and the next line with nothing between them: "-use-ld=lld-Xlinker".
        self.assertIn("RELEASE_FLAGS differ", problems(DOCKERFILE.replace("-use-ld=lld \\\n", "-use-ld=lld\\\n", 1)))

    def test_a_comment_inside_the_instruction_is_dropped_as_docker_drops_it(self):
        commented = DOCKERFILE.replace("-use-ld=lld \\\n", "-use-ld=lld \\\n# the order file\n", 1)
        self.assertEqual(problems(commented), [])

    def test_a_build_without_the_flags_is_refused_however_its_options_are_ordered(self):
        for build in (
            "swift build -c release --product iap-worker --static-swift-stdlib",
            "swift build --product iap-worker -c release --static-swift-stdlib",
            'swift build -c release --product iap-worker --static-swift-stdlib "$RELEASE_FLAGS"',
        ):
            with self.subTest(build=build):
                self.assertTrue(any("without" in p for p in problems(DOCKERFILE.replace(WORKER_BUILD, build, 1))))

    def test_a_second_build_in_the_same_run_is_refused(self):
        second = DOCKERFILE.replace(WORKER_BUILD, WORKER_BUILD + " && swift build -c release --product iap-worker", 1)
        self.assertTrue(any("without" in p for p in problems(second)))

    def test_the_flags_set_after_the_build_are_refused(self):
        start = DOCKERFILE.index("ENV RELEASE_FLAGS")
        end = DOCKERFILE.index("RUN " + WORKER_BUILD)
        moved = DOCKERFILE[:start] + DOCKERFILE[end:] + "\n" + DOCKERFILE[start:end]
        self.assertTrue(any("before it sets" in p for p in problems(moved)))

    def test_a_variable_in_the_makefiles_flags_counts_with_its_default(self):
        # The Makefile's flags name $(PACKED_RELOCATIONS): the image must pass what it expands to by default.
        self.assertIn("pack-relative-relocs", check.makefile_flags(MAKEFILE))
        self.assertIn("RELEASE_FLAGS differ", problems(DOCKERFILE.replace(" \\\n-Xlinker -z -Xlinker pack-relative-relocs", "", 1)))
        with self.assertRaises(SystemExit):
            check.makefile_flags(MAKEFILE.replace("PACKED_RELOCATIONS ?=", "PACKED_RELOCS ?=", 1))

    def test_asking_for_the_bin_path_is_not_a_build(self):
        self.assertEqual(check.commands('bin="$(swift build -c release --show-bin-path)" && true')[0][0][:4], "bin=")
        self.assertEqual(problems(DOCKERFILE + "\nRUN swift build -c release --show-bin-path\n"), [])


if __name__ == "__main__":
    unittest.main(verbosity=1)
