#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (FuzzTesting/Corpus/<target>/), in the framing docs/fuzzing.md describes.

Run it again after changing the framing (FuzzSupport/PurchaseRecordFuzz.swift); the files it writes are committed.
Inputs the fuzzers found are kept beside the seeds under names of their own and are not touched.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# PurchaseRecordFuzz.headerNames: a name byte below len(NAMES) picks one of these.
PROVENANCE = ["iap-original-topic", "iap-original-partition", "iap-original-offset", "iap-original-timestamp",
              "iap-reason", "iap-error", "iap-attempts", "iap-failed-at", "iap-worker"]
NAMES = PROVENANCE + ["iap-value-omitted-bytes", "iap-", "iap-extra", "IAP-ATTEMPTS", "content-type", "ce_id",
                      "traceparent", ""]

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63

# Record flags.
TRUSTED, KEY, FROM_DLQ, DEAD_LETTER, NO_TIMESTAMP, REPEAT = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
# Configuration byte.
REJECT_TEST, SMALL_MESSAGES = 0x01, 0x08
def dlq_limit(index):  # Int.max, 8192, 6144, 5120
    return index << 1


def field(data):
    data = data.encode() if isinstance(data, str) else data
    return struct.pack("<H", len(data)) + data


def record(value=b"", flags=0, partition=0, timestamp=1_700_000_000_123, key=None, headers=(), faults=0,
           dead_letter=0, dead_letter_attempts=1, script=b""):
    out = bytes([flags | (KEY if key is not None else 0), partition]) + struct.pack("<q", timestamp) + field(value)
    if key is not None:
        out += field(key)
    out += bytes([len(headers)])
    for name, header_value in headers:
        out += bytes([NAMES.index(name)]) if name in NAMES else bytes([255]) + field(name)
        out += bytes([1 if header_value is None else 0]) + field(header_value or b"")
    return out + bytes([faults, dead_letter]) + struct.pack("<q", dead_letter_attempts) + field(script)


def purchase_input(*records, config=0, now=1_763_900_000_000):
    return bytes([config]) + struct.pack("<q", now) + b"".join(records)


def message(seq, user="QXG774PMRZMWR3BR", token=None, **extra):
    body = {"paymentSeq": seq, "purchaseToken": token or f"tok-{seq}", "userId": user}
    body.update(extra)
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# Scripts of the scripted Gamebase (ScriptedGamebase): one op byte per call, then the op's own bytes.
GENUINE = bytes([7])
def refusal(code_index):  # ScriptedGamebase.refusalCodes: 0 1100, 1 5000, 2 5018, 3 -4010004, 4 9999 …
    return bytes([3, code_index])
def transport(kind):  # 0 timeout, 1 invalid response, 2 HTTP 502, 3 invalid request
    return bytes([4, kind])
def payment(seq=b"\0", user=b"\0", consumable=0, product_type=0, product=0, price=b"\0", test=0):
    """A hostile payment: identifiers as ScriptedGamebase.identifier reads them (b"\\0" = the claim's own)."""
    return bytes([0]) + seq + user + bytes([consumable, product_type, product]) + price + bytes([test, 0])
def own():
    return b"\0"
def text(value):
    return bytes([6]) + field(value)
def look_alike(kind):
    return bytes([2, kind])
CONSUMED, CONSUME_5000, CONSUME_TIMEOUT_APPLIED = bytes([4]), bytes([0]), bytes([3])

SDK_RECEIPT = ('{"userId":"QXG774PMRZMWR3BR","paymentSeq":"2024051310001234","purchaseToken":"tok/+=",'
               '"gamebaseProductId":"gem","storeCode":"GG","payload":"p","marketItemId":"com.game.gem",'
               '"productType":"CONSUMABLE","price":1.5,"purchaseTime":1715563230000,"extra":{"nested":[1,2,{"a":null}]}}')

FORGED = [("iap-attempts", "9223372036854775807"), ("iap-original-timestamp", "9223372036854775807"),
          ("iap-original-topic", "someone-elses-topic"), ("iap-original-partition", "2147483647"),
          ("iap-original-offset", "-1"), ("iap-reason", "gamebase_unavailable")]

PURCHASE_SEEDS = {
    "genuine-purchase": purchase_input(record(message("2024051310001234"), key="QXG774PMRZMWR3BR")),
    "sdk-receipt": purchase_input(record(SDK_RECEIPT, headers=[("traceparent", "00-abc-def-01")])),
    "redelivered": purchase_input(record(message("2024051310001234")), record(b"", flags=REPEAT)),
    "empty-object-attempts-int64-max": purchase_input(record("{}", headers=[("iap-attempts", "9223372036854775807")])),
    "empty-object-timestamp-int64-max": purchase_input(
        record("{}", headers=[("iap-original-timestamp", "9223372036854775807")])),
    "forged-provenance": purchase_input(record("{}", key="k", headers=FORGED, partition=3)),
    "forged-provenance-on-a-good-purchase": purchase_input(
        record(message("p-1"), headers=FORGED + [("iap-value-omitted-bytes", "12")], flags=DEAD_LETTER)),
    "dead-letter-record-reprocessed": purchase_input(record(
        message("p-2"), flags=TRUSTED | FROM_DLQ | DEAD_LETTER, dead_letter=0, dead_letter_attempts=4,
        headers=[("iap-original-topic", "purchase.completed"), ("iap-original-partition", "1"),
                 ("iap-original-offset", "77"), ("iap-original-timestamp", "1700000000000"),
                 ("iap-reason", "gamebase_unavailable"), ("iap-attempts", "3"), ("iap-worker", "w-1")])),
    "dead-letter-record-extreme-provenance": purchase_input(record(
        message("p-3"), flags=TRUSTED | FROM_DLQ | DEAD_LETTER, timestamp=INT64_MIN, dead_letter_attempts=INT64_MAX,
        headers=[(name, "9223372036854775807") for name in
                 ["iap-attempts", "iap-original-timestamp", "iap-original-partition", "iap-original-offset"]]
        + [("iap-original-topic", "purchase.completed")])),
    "timestamps-int64-min-max": purchase_input(
        record("not json", timestamp=INT64_MIN), record("not json", timestamp=INT64_MAX, flags=NO_TIMESTAMP),
        now=INT64_MAX),
    "stolen-claim-before-the-owner": purchase_input(
        record(message("c-100", user="thief", token="tok-real"), script=payment(user=text("owner"))),
        record(message("c-100", user="owner", token="tok-real"))),
    "forged-token-before-the-owner": purchase_input(
        record(message("c-100", user="owner", token="made-up"), script=refusal(0)),
        record(message("c-100", user="owner", token="tok-real"))),
    "conflicting-claims-after-the-grant": purchase_input(
        record(message("c-100", user="owner", token="tok-real")),
        record(message("c-100", user="thief", token="tok-real")),
        record(message("c-100", user="owner", token="made-up")),
        record(message("c-100", user="owner", token="tok-real"))),
    "look-alike-user": purchase_input(
        record(message("seq-caf\u00e9", user="caf\u00e9", token="tok-cafe"), script=payment(user=look_alike(0))),
        record(message("seq-caf\u00e9", user="cafe\u0301", token="tok-cafe"))),
    "gamebase-unavailable": purchase_input(record(message("u-1"), script=transport(0) * 3)),
    "gamebase-misconfigured": purchase_input(record(message("u-2"), script=refusal(3))),
    "consumed-elsewhere": purchase_input(record(message("e-1"), script=payment(consumable=1))),
    "subscription": purchase_input(record(message("s-1"), script=payment(product_type=2))),
    "test-purchase-rejected": purchase_input(record(message("t-1"), script=payment(test=1)), config=REJECT_TEST),
    "huge-payment-seq-answer": purchase_input(record(message("h-1"), script=payment(seq=bytes([4, 200])))),
    "price-answer": purchase_input(record(message("pr-1"), script=payment(price=bytes([2]) + field("1e-7")))),
    "consume-refused": purchase_input(record(message("r-1"), script=GENUINE + CONSUME_5000 * 3)),
    "consume-timeout-applied": purchase_input(record(message("r-2"), script=GENUINE + CONSUME_TIMEOUT_APPLIED)),
    "ledger-and-publish-faults": purchase_input(record(message("f-1"), faults=0x21), record(b"", flags=REPEAT)),
    "malformed-invalid-utf8": purchase_input(record(bytes([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]))),
    "malformed-duplicate-field": purchase_input(
        record('{"userId":"u","paymentSeq":"1","paymentSeq":"2","purchaseToken":"t"}')),
    "malformed-deep-nesting": purchase_input(record("[" * 3000 + "]" * 3000)),
    "malformed-control-character": purchase_input(record('{"userId":"u\\n","paymentSeq":"1","purchaseToken":"t"}')),
    "malformed-8k-token": purchase_input(record(message("k-1", token="t" * 8200))),
    "malformed-over-the-size-limit": purchase_input(record(message("m-1", pad="x" * 300)), config=SMALL_MESSAGES),
    "too-large-for-the-dead-letter-topic": purchase_input(
        record("x" * 9000, key="k" * 10, headers=[("traceparent", "y" * 100)]), config=dlq_limit(1)),
    "too-large-producer-iap-header": purchase_input(
        record("x" * 100, key="k", headers=[("iap-extra", "y" * 7000)]), config=dlq_limit(3)),
    "too-large-forged-iap-attempts": purchase_input(
        record("x" * 100, key="k", headers=[("iap-attempts", "9" * 7000)]), config=dlq_limit(3)),
    "too-large-key-for-the-dead-letter-topic": purchase_input(record("x" * 100, key="k" * 5000), config=dlq_limit(3)),
}


def envelope(result=None, successful=True, code=0, message="SUCCESS", transaction=True):
    header = {"isSuccessful": successful, "resultCode": code, "resultMessage": message}
    if transaction:
        header = {"transactionId": "9f1c2d3e-aaaa-bbbb-cccc-000000000001", **header}
    body = {"header": header}
    if result is not None:
        body["result"] = result
    return json.dumps(body, indent=2)


PAYMENT = {"paymentSeq": "2024051310001234", "productSeq": 1000123, "currency": "KRW", "price": 1200.0,
           "marketId": "GG", "accessToken": "tok_Zx81-qP_example", "paymentId": "GPA.0000-1111-2222-33333",
           "productType": "CONSUMABLE", "userId": "QXG774PMRZMWR3BR", "gamebaseProductId": "gem_pack_100",
           "purchaseTime": "2024-05-13T10:20:30+09:00", "payload": "{\"characterId\":\"c-42\"}",
           "isTestPurchase": False, "isConsumable": True}
CONSUMABLES = [
    {"paymentSeq": "2024051310001234", "productSeq": 1000123, "currency": "KRW", "price": 1200.0, "marketId": "GG",
     "accessToken": "tok_Zx81-qP_example", "paymentId": "GPA.0000-1111-2222-33333", "gamebaseProductId": "gem_pack_100",
     "purchaseTime": "2024-05-13T10:20:30+09:00", "payload": "{\"characterId\":\"c-42\"}", "isTestPurchase": False},
    {"paymentSeq": "2024051310005678", "productSeq": 1000456, "currency": "USD", "price": 4.99, "marketId": "AS",
     "accessToken": "tok_Qa77_example", "paymentId": "2000000123456789", "gamebaseProductId": "starter_bundle",
     "purchaseTime": "2024-05-13T11:00:00+09:00", "isTestPurchase": True}]


def without(key):
    return {k: v for k, v in PAYMENT.items() if k != key}


ANSWER_SEEDS = {
    "payment-transaction": envelope(PAYMENT),
    "consume": envelope({"price": 1200.0, "currency": "KRW", "productSeq": 1000123, "marketId": "GG",
                         "gamebaseProductId": "gem_pack_100", "payload": "{\"characterId\":\"c-42\"}"}),
    "consumables": envelope(CONSUMABLES),
    "consumables-empty": envelope([]),
    "already-consumed": envelope(successful=False, code=5018, message="already consumed"),
    "invalid-secret-key": json.dumps({"header": {
        "transactionId": "c0ffee00-1111-2222-3333-444455556666", "isSuccessful": False, "resultCode": -4010004,
        "resultMessage": "invalid secret key", "traceError": {
            "trackingTime": 1718000000000, "throwPoint": "gateway", "uri": "/tcgb-inapp/v1.3/apps/AbCdEf12/consume"}}}),
    "unknown-error": envelope(successful=False, code=9999, message="unknown error", transaction=False),
    "success-without-result": envelope(),
    "success-null-result": '{"header":{"isSuccessful":true,"resultCode":0},"result":null}',
    "payment-without-is-consumable": envelope(without("isConsumable")),
    "payment-without-user": envelope(without("userId")),
    "payment-null-seq": envelope({**PAYMENT, "paymentSeq": None}),
    "payment-price-huge-exponent": envelope(PAYMENT).replace("1200.0", "1e99999999999999999999"),
    "payment-price-38-digits": envelope(PAYMENT).replace("1200.0", "99999999999999999999999999999999999999e127"),
    "payment-price-tiny": envelope(PAYMENT).replace("1200.0", "-0.000000000000000000000000000000000000001e-120"),
    "payment-price-string": envelope({**PAYMENT, "price": "1200.0"}),
    "payment-unicode": envelope({**PAYMENT, "userId": "caf\u00e9\ud83d\ude00", "paymentSeq": "\u0661\u0662"}),
    "header-disagrees": envelope(PAYMENT, successful=True, code=5000),
    "result-code-huge": '{"header":{"isSuccessful":false,"resultCode":9223372036854775808}}',
    "duplicate-keys": '{"header":{"isSuccessful":false,"resultCode":0,"isSuccessful":true},"result":'
                      + json.dumps(PAYMENT) + ',"result":{}}',
}


# FuzzStoreNotification: the first byte is the mode (StoreNotifications.check): 0 the record as it is, 1 the rest as
# an Apple body's signedPayload, 2 a JWS of three fields (header, payload, signature), 3 Google's notification bare
# and in a Pub/Sub push envelope.
PACKAGE = "com.example.game"


def google(member, body, package=PACKAGE, time="1764000000123"):
    return json.dumps({"version": "1.0", "packageName": package, "eventTimeMillis": time, member: body})


VOIDED = google("voidedPurchaseNotification", {"purchaseToken": "play-token-" + "x" * 40, "orderId": "GPA.1234-5678-9012-34567",
                                              "productType": 2, "refundType": 1})
APPLE_HEADER = json.dumps({"alg": "ES256", "x5c": ["MIIBszCCAVmgAwIBAgIU", "MIIB", "AAAA"]})
APPLE_PAYLOAD = json.dumps({"notificationType": "REFUND", "notificationUUID": "1b2c3d4e-0000-4000-8000-000000000000",
                            "version": "2.0", "signedDate": 1764000000123,
                            "data": {"bundleId": PACKAGE, "environment": "Production", "signedTransactionInfo": "a.b.c"}})
STORE_SEEDS = {
    "google-voided": b"\3" + VOIDED.encode(),
    "google-partial": b"\3" + google("voidedPurchaseNotification", {"purchaseToken": "t", "orderId": "GPA.1",
                                                                    "productType": 2, "refundType": 2}).encode(),
    "google-one-time": b"\3" + google("oneTimeProductNotification", {"version": "1.0", "notificationType": 1,
                                                                     "purchaseToken": "t", "sku": "gems"}).encode(),
    "google-test": b"\3" + google("testNotification", {"version": "1.0"}).encode(),
    "google-other-package": b"\3" + google("voidedPurchaseNotification", {"purchaseToken": "t", "orderId": "GPA.2"},
                                           package="com.other").encode(),
    "google-time-int64-max": b"\3" + google("voidedPurchaseNotification", {"purchaseToken": "t", "orderId": "GPA.3"},
                                            time="9223372036854775807").encode(),
    "pubsub-message": b"\0" + json.dumps({"data": __import__("base64").b64encode(VOIDED.encode()).decode(),
                                          "messageId": "17"}).encode(),
    "push-envelope": b"\0" + json.dumps({"message": {"data": __import__("base64").b64encode(VOIDED.encode()).decode(),
                                                     "messageId": "18"}, "subscription": "s"}).encode(),
    "not-json": b"\0{not json",
    "apple-body-number": b'\0{"signedPayload":42}',
    "apple-three-dots": b"\1a.b.c",
    "apple-jws": b"\2" + field(APPLE_HEADER) + field(APPLE_PAYLOAD) + field(b"\0" * 64),
    "apple-jws-no-chain": b"\2" + field('{"alg":"ES256"}') + field(APPLE_PAYLOAD) + field(b""),
    "apple-jws-none": b"\2" + field('{"alg":"none","x5c":[]}') + field(APPLE_PAYLOAD) + field(b""),
}


def write(target, seeds):
    folder = os.path.join(HERE, "Corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, "seed-" + name), "wb") as file:
            file.write(data.encode() if isinstance(data, str) else data)


if __name__ == "__main__":
    write("FuzzPurchaseRecord", PURCHASE_SEEDS)
    write("FuzzGamebaseAnswer", ANSWER_SEEDS)
    write("FuzzStoreNotification", STORE_SEEDS)
