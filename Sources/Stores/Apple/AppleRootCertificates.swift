import SwiftASN1
import X509

/// The certificate authority every App Store JWS chains to.
public enum AppleRootCertificates {
    /// Apple Root CA – G3 (ECDSA P-384, valid 2014-04-30 to 2039-04-30), as Apple publishes it at
    /// https://www.apple.com/certificateauthority/AppleRootCA-G3.cer. Its SHA-256 fingerprint, which a test checks, is
    /// 63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79.
    public static let rootCAG3PEM = """
        -----BEGIN CERTIFICATE-----
        MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwS
        QXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9u
        IEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcN
        MTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBS
        b290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9y
        aXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49
        AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtf
        TjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517
        IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySr
        MA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gA
        MGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4
        at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM
        6BgD56KyKA==
        -----END CERTIFICATE-----
        """

    /// The certificates of a PEM text (`refunds.apple.root_certificates_file`): at least one, each a CERTIFICATE block.
    ///
    /// - Throws: ``StoreNotificationError`` (`malformed`) saying what is wrong, never quoting the text.
    public static func certificates(pem: String) throws(StoreNotificationError) -> [Certificate] {
        let documents: [PEMDocument]
        do {
            documents = try PEMDocument.parseMultiple(pemString: pem)
        } catch {
            throw AppleJWSVerifier.malformed("not PEM text")
        }
        guard !documents.isEmpty else { throw AppleJWSVerifier.malformed("holds no certificate") }
        var certificates: [Certificate] = []
        for document in documents {
            guard document.discriminator == "CERTIFICATE", let certificate = try? Certificate(pemDocument: document)
            else {
                throw AppleJWSVerifier.malformed("holds a \(document.discriminator) block that is not a certificate")
            }
            certificates.append(certificate)
        }
        return certificates
    }

    /// Apple Root CA – G3, parsed.
    public static func rootCAG3() throws -> Certificate {
        try Certificate(pemEncoded: rootCAG3PEM)
    }
}
