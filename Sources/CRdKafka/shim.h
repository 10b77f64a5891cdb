#ifndef IAP_WORKER_CRDKAFKA_SHIM_H
#define IAP_WORKER_CRDKAFKA_SHIM_H

#include <librdkafka/rdkafka.h>

/// Swift cannot call the variadic rd_kafka_producev(); this fixed-arity wrapper is the only shim.
/// The payload and key are copied (RD_KAFKA_MSG_F_COPY). On success librdkafka owns `headers`;
/// on failure the caller still owns them and must destroy them.
static inline rd_kafka_resp_err_t iap_rd_kafka_produce(rd_kafka_t *rk,
                                                       const char *topic,
                                                       int32_t partition,
                                                       const void *key, size_t key_len,
                                                       const void *value, size_t value_len,
                                                       rd_kafka_headers_t *headers,
                                                       void *msg_opaque) {
    return rd_kafka_producev(rk,
                             RD_KAFKA_V_TOPIC(topic),
                             RD_KAFKA_V_PARTITION(partition),
                             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                             RD_KAFKA_V_KEY(key, key_len),
                             RD_KAFKA_V_VALUE((void *)value, value_len),
                             RD_KAFKA_V_HEADERS(headers),
                             RD_KAFKA_V_OPAQUE(msg_opaque),
                             RD_KAFKA_V_END);
}

#endif
