#ifndef IAP_WORKER_CRDKAFKA_MOCK_H
#define IAP_WORKER_CRDKAFKA_MOCK_H

/// librdkafka's mock cluster, for tests and the development tools only: the explicit submodule CRdKafka.Mock, which
/// nothing the operator's executable links imports.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#endif
