import Foundation
import Wire

// Reading Gamebase results with `JSONReader`: the same fields, types and optionality as their `Codable`
// conformances (which the simulator keeps using to write them). Unknown fields are skipped (contract §3.4).

extension PaymentTransaction {
    package static func read(_ reader: inout JSONReader) throws(JSONReader.Failure) -> Self {
        var paymentSeq: String?
        var userId: String?
        var transaction = PaymentTransaction(paymentSeq: "", userId: "")
        try reader.readObject { reader, key throws(JSONReader.Failure) in
            switch key {
            case "paymentSeq": paymentSeq = try reader.readOptionalString()
            case "userId": userId = try reader.readOptionalString()
            case "productSeq": transaction.productSeq = try reader.readOptionalInt64()
            case "currency": transaction.currency = try reader.readOptionalString()
            case "price": transaction.price = try reader.readOptionalDecimal()
            case "marketId": transaction.marketId = try reader.readOptionalString()
            case "accessToken": transaction.accessToken = try reader.readOptionalString()
            case "paymentId": transaction.paymentId = try reader.readOptionalString()
            case "paymentToken": transaction.paymentToken = try reader.readOptionalString()
            case "productType": transaction.productType = try reader.readOptionalString()
            case "gamebaseProductId": transaction.gamebaseProductId = try reader.readOptionalString()
            case "purchaseTime": transaction.purchaseTime = try reader.readOptionalString()
            case "payload": transaction.payload = try reader.readOptionalString()
            case "isTestPurchase": transaction.isTestPurchase = try reader.readOptionalBool()
            case "isConsumable": transaction.isConsumable = try reader.readOptionalBool()
            default: try reader.skipValue()
            }
        }
        // Fail closed: without these three the flow cannot tell whose payment it is, or whether it may be granted.
        guard let paymentSeq, let userId else {
            throw JSONReader.Failure(offset: 0, problem: "the payment lacks paymentSeq or userId")
        }
        guard transaction.isConsumable != nil else {
            throw JSONReader.Failure(offset: 0, problem: "the payment lacks isConsumable")
        }
        transaction.paymentSeq = paymentSeq
        transaction.userId = userId
        // The ledger stores these: a NUL (which PostgreSQL's text cannot hold) or a field of a size no store
        // answer has would fail the grant on every try; such an answer is not one to grant on.
        let stored = [
            paymentSeq, userId, transaction.currency, transaction.marketId, transaction.accessToken,
            transaction.paymentId, transaction.paymentToken, transaction.productType, transaction.gamebaseProductId,
            transaction.purchaseTime, transaction.payload,
        ]
        for case let value? in stored where value.utf8.count > Self.maxFieldBytes || value.utf8.contains(0) {
            throw JSONReader.Failure(
                offset: 0, problem: "a payment field holds a NUL or is longer than \(Self.maxFieldBytes) bytes")
        }
        return transaction
    }

    /// The longest string field of a payment answer the worker takes (UTF-8 bytes).
    static let maxFieldBytes = 8192
}

extension ConsumeResult {
    package static func read(_ reader: inout JSONReader) throws(JSONReader.Failure) -> Self {
        var result = ConsumeResult()
        try reader.readObject { reader, key throws(JSONReader.Failure) in
            switch key {
            case "price": result.price = try reader.readOptionalDecimal()
            case "currency": result.currency = try reader.readOptionalString()
            case "productSeq": result.productSeq = try reader.readOptionalInt64()
            case "marketId": result.marketId = try reader.readOptionalString()
            case "gamebaseProductId": result.gamebaseProductId = try reader.readOptionalString()
            case "payload": result.payload = try reader.readOptionalString()
            default: try reader.skipValue()
            }
        }
        return result
    }
}

extension ConsumableItem {
    package static func read(_ reader: inout JSONReader) throws(JSONReader.Failure) -> Self {
        var paymentSeq: String?
        var item = ConsumableItem(paymentSeq: "")
        try reader.readObject { reader, key throws(JSONReader.Failure) in
            switch key {
            case "paymentSeq": paymentSeq = try reader.readOptionalString()
            case "productSeq": item.productSeq = try reader.readOptionalInt64()
            case "currency": item.currency = try reader.readOptionalString()
            case "price": item.price = try reader.readOptionalDecimal()
            case "marketId": item.marketId = try reader.readOptionalString()
            case "accessToken": item.accessToken = try reader.readOptionalString()
            case "paymentId": item.paymentId = try reader.readOptionalString()
            case "gamebaseProductId": item.gamebaseProductId = try reader.readOptionalString()
            case "purchaseTime": item.purchaseTime = try reader.readOptionalString()
            case "payload": item.payload = try reader.readOptionalString()
            case "isTestPurchase": item.isTestPurchase = try reader.readOptionalBool()
            default: try reader.skipValue()
            }
        }
        guard let paymentSeq else { throw JSONReader.Failure(offset: 0, problem: "a consumable lacks paymentSeq") }
        item.paymentSeq = paymentSeq
        return item
    }

    package static func readList(_ reader: inout JSONReader) throws(JSONReader.Failure) -> [Self] {
        var items: [Self] = []
        try reader.readArray { reader throws(JSONReader.Failure) in items.append(try read(&reader)) }
        return items
    }
}
