# Sourced by scripts/check-venv.sh and scripts/kafka-tools.sh: a Python venv under .build holding exactly the pinned
# requirements given, installed again only when they change; safe from several processes at once (a lock per venv).
#   ensure_venv VENV "REQUIREMENTS (one per line)" SETUP [pip install options…]
# SETUP is a command run with VENV after an install (`true` for none); the venv counts as installed only once it
# succeeded. Returns non-zero when pip or SETUP failed. Prints nothing on stdout (pip's output goes to stderr).
ensure_venv() {
    local venv=$1 requirements=$2 setup=$3
    shift 3
    mkdir -p "$(dirname "$venv")"
    exec 9> "$venv.lock"
    flock 9
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" >&2 || return 1
    fi
    if [ "$(cat "$venv/requirements.txt" 2>/dev/null)" != "$requirements" ]; then
        echo "$(basename "$0"): installing $(echo "$requirements" | tr '\n' ' ')into $venv" >&2
        printf '%s\n' "$requirements" > "$venv/requirements.in"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" -r "$venv/requirements.in" >&2 || return 1
        "$setup" "$venv" || return 1
        printf '%s' "$requirements" > "$venv/requirements.txt"
    fi
}
