"""Reads iap-worker's event records as a downstream consumer would: with the official CloudEvents Python SDK.

    cloudevents-interop.py RECORDS.json
    (python: the one scripts/cloudevents-venv.sh prints, which has cloudevents 2.x and jsonschema)

RECORDS.json is {"records": [{"topic": str, "key": base64|null, "value": base64,
"headers": [[name, base64|null], ...]}, ...]}: item-granted and consume-failed records as the worker produced
them, and item-revoked and refund-reversed records (a Swift test dumps them from a mock-cluster run). Every record is read with the SDK's Kafka binding,
`cloudevents.core.bindings.kafka.from_kafka`, which picks binary mode when any header starts with its `ce_`
prefix and structured mode otherwise, exactly as a consumer using the SDK does. Then each event must carry
DESIGN §2's attributes (specversion 1.0, the deterministic id, source /iap-worker/<group_id>, type, subject,
an RFC 3339 time, datacontenttype application/json), the record key must be the data's userId when there is
one, and `data` must validate against docs/schemas/item-granted-data.schema.json, consume-failed-data.schema.json
or item-revoked-data.schema.json (chosen by type, formats checked).

Prints one line per failure and a summary (how many of each type were read and valid: the caller checks those it
produced); exits 1 if any record fails or none is valid; 2 on an unreadable file.
"""
import base64
import json
import pathlib
import re
import sys

import jsonschema
from cloudevents.core.bindings.kafka import KafkaMessage, from_kafka
from cloudevents.core.formats.json import JSONFormat

root = pathlib.Path(__file__).resolve().parent.parent
ITEM_GRANTED = "gamebase.iap.item.granted.v1"
CONSUME_FAILED = "gamebase.iap.consume.failed.v1"
ITEM_REVOKED = "gamebase.iap.item.revoked.v1"
REFUND_REVERSED = "gamebase.iap.refund.reversed.v1"
SCHEMAS = {
    ITEM_GRANTED: "docs/schemas/item-granted-data.schema.json",
    CONSUME_FAILED: "docs/schemas/consume-failed-data.schema.json",
    ITEM_REVOKED: "docs/schemas/item-revoked-data.schema.json",
    REFUND_REVERSED: "docs/schemas/item-revoked-data.schema.json",
}
# The id suffix of each event type that has one id per grant.
GRANT_IDS = {ITEM_GRANTED: "item-granted", ITEM_REVOKED: "item-revoked", REFUND_REVERSED: "refund-reversed"}
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

validators = {}
for event_type, path in SCHEMAS.items():
    schema = json.loads((root / path).read_text())
    validators[event_type] = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
if "date-time" not in jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers:
    sys.exit("cloudevents-interop: jsonschema cannot check date-time here (install rfc3339-validator)")


def decode(value):
    return None if value is None else base64.b64decode(value, validate=True)


def kafka_message(record):
    """The SDK's message type. Its headers are a dict, as a consumer builds from its client's header list."""
    headers = {}
    for name, value in record.get("headers") or []:
        if name in headers:
            raise ValueError(f"header {name!r} appears twice")
        headers[name] = decode(value) or b""
    return KafkaMessage(headers=headers, key=decode(record.get("key")), value=decode(record["value"]))


def check_event(record, event):
    """The attributes and data DESIGN §2 promises; a list of problems."""
    problems = []
    attributes = event.get_attributes()
    event_type = event.get_type()
    data = event.get_data()
    if event.get_specversion() != "1.0":
        problems.append(f"specversion {event.get_specversion()!r}, not '1.0'")
    if event_type not in SCHEMAS:
        return problems + [f"type {event_type!r} is none of {', '.join(SCHEMAS)}"]
    if not str(event.get_source()).startswith("/iap-worker/") or event.get_source() == "/iap-worker/":
        problems.append(f"source {event.get_source()!r} is not /iap-worker/<group_id>")
    if event.get_datacontenttype() != "application/json":
        problems.append(f"datacontenttype {event.get_datacontenttype()!r}, not application/json")
    raw_time = json.loads(record["_value"]).get("time") if record.get("_structured") else None
    time = event.get_time()
    if time is None or time.tzinfo is None or (raw_time is not None and not RFC3339.match(raw_time)):
        problems.append(f"time {raw_time or time!r} is not an RFC 3339 timestamp")
    if not isinstance(data, dict):
        return problems + [f"data is {type(data).__name__}, not a JSON object"]
    subject, event_id = event.get_subject(), event.get_id()
    payment_seq = data.get("paymentSeq")
    if subject != payment_seq:
        problems.append(f"subject {subject!r} is not data.paymentSeq {payment_seq!r}")
    # A grant's later revocations and their reversals carry their number: <paymentSeq>:item-revoked:<n>, n = 2, 3, ….
    numbered = event_type in (ITEM_REVOKED, REFUND_REVERSED)
    if event_type in GRANT_IDS and event_id != f"{payment_seq}:{GRANT_IDS[event_type]}" and not (
        numbered and re.fullmatch(re.escape(f"{payment_seq}:{GRANT_IDS[event_type]}") + r":([2-9]|[1-9]\d+)", event_id or "")
    ):
        suffix = "[:<n>]" if numbered else ""
        problems.append(f"id {event_id!r} is not <paymentSeq>:{GRANT_IDS[event_type]}{suffix}")
    # One id per rejected message: <paymentSeq>:consume-failed:<hash>[:<reason>], or, for a malformed message,
    # <topic>/<partition>/<offset>:consume-failed.
    if event_type == CONSUME_FAILED and not (
        (payment_seq and event_id.startswith(f"{payment_seq}:consume-failed:"))
        or re.fullmatch(r".+/\d+/\d+:consume-failed", event_id or "")
    ):
        problems.append(
            f"id {event_id!r} is not <paymentSeq>:consume-failed:<hash> or <topic>/<partition>/<offset>:consume-failed")
    key = attributes.get("partitionkey")  # the SDK puts the record key there
    if data.get("userId") is not None and key != data["userId"]:
        problems.append(f"record key {key!r} is not data.userId {data['userId']!r}")
    for error in sorted(validators[event_type].iter_errors(data), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(data)"
        problems.append(f"data {where}: {error.message} ({SCHEMAS[event_type]})")
    return problems


def main(path):
    try:
        records = json.loads(pathlib.Path(path).read_text())["records"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"cloudevents-interop: cannot read {path}: {error}", file=sys.stderr)
        return 2
    counts = {event_type: 0 for event_type in SCHEMAS}
    failed = 0
    for index, record in enumerate(records):
        label = f"record {index} ({record.get('topic')})"
        try:
            message = kafka_message(record)
            record["_value"] = message.value
            record["_structured"] = not any(name.lower().startswith("ce_") for name in message.headers)
            event = from_kafka(message, JSONFormat())
        except Exception as error:  # the SDK's refusal is the finding
            failed += 1
            print(f"FAIL {label}: the CloudEvents SDK cannot read it: {type(error).__name__}: {error}")
            continue
        label = f"record {index} ({record.get('topic')}, id {event.get_id()})"
        problems = check_event(record, event)
        if problems:
            failed += 1
            for problem in problems:
                print(f"FAIL {label}: {problem}")
        elif event.get_type() in counts:
            counts[event.get_type()] += 1
    # Which types a run must hold is the caller's to check (it knows what it produced); a run of no valid record at all
    # is a failure here.
    empty = sum(counts.values()) == 0
    print(
        f"{len(records)} records: {counts[ITEM_GRANTED]} item-granted and {counts[CONSUME_FAILED]} consume-failed "
        f"read and valid, {failed} failed")
    print(
        f"revocations: {counts[ITEM_REVOKED]} item-revoked and {counts[REFUND_REVERSED]} refund-reversed read and valid")
    if empty:
        print("FAIL no valid record")
    return 1 if failed or empty else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
