"""Upstream's TLS flags for the secure port (`--tls-min-version`, `--tls-cipher-suites`,
`--tls-sni-cert-key`), with component-base's names and error lines, applied to Python's
ssl.SSLContext.

- `--tls-min-version`: VersionTLS10 ... VersionTLS13; the default is TLS 1.2, as upstream's.
- `--tls-cipher-suites`: Go's suite names (crypto/tls CipherSuites and InsecureCipherSuites, and
  the two legacy CHACHA20 names component-base keeps), mapped to OpenSSL's. As in Go, the list
  orders and limits the TLS 1.0-1.2 suites; TLS 1.3's three are always on (neither Go nor
  OpenSSL's cipher string configures them). A suite this machine's OpenSSL lacks is left out; a
  list of nothing but such suites is refused.
- `--tls-sni-cert-key CERT,KEY[:NAME,...]` (repeatable): further certificates chosen by the
  name the client asks for (SNI), as the apiserver's: the names given, else the certificate's
  DNS names and common name; `*.example.com` matches one label. A client asking for another
  name (or none) gets the default certificate.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from desched.errors import InputError

VERSIONS = {
    "VersionTLS10": ssl.TLSVersion.TLSv1,
    "VersionTLS11": ssl.TLSVersion.TLSv1_1,
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}
_TLS13 = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
# Go's name -> OpenSSL's, for the suites TLS 1.0-1.2 negotiate.
CIPHER_SUITES = {
    # crypto/tls CipherSuites()
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    # component-base's legacy names
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    # crypto/tls InsecureCipherSuites()
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
}


def min_version(name: str | None) -> ssl.TLSVersion:
    """--tls-min-version's version (none given: TLS 1.2, upstream's default)."""
    if not name:
        return ssl.TLSVersion.TLSv1_2
    version = VERSIONS.get(name)
    if version is None:
        raise InputError("--tls-min-version", f'unknown tls version "{name}"')
    return version


def split_list(values: Iterable[str]) -> list[str]:
    """pflag's StringSlice: comma-separated, repeatable."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def set_cipher_suites(context: ssl.SSLContext, names: Sequence[str]) -> None:
    """Limit and order `context`'s TLS 1.0-1.2 suites to `names` (Go's names)."""
    if not names:
        return
    openssl = []
    for name in names:
        if name in _TLS13:
            continue  # always on, as in Go
        mapped = CIPHER_SUITES.get(name)
        if mapped is None:
            raise InputError("--tls-cipher-suites",
                             f"Cipher suite {name} not supported or doesn't exist")
        openssl.append(mapped)
    if not openssl:
        return
    try:
        context.set_ciphers(":".join(openssl))
    except ssl.SSLError:
        raise InputError("--tls-cipher-suites", "none of the suites is available in this "
                         f"machine's OpenSSL: {', '.join(names)}") from None


@dataclass(frozen=True)
class SniCertKey:
    cert_file: str
    key_file: str
    names: tuple[str, ...]  # empty: the certificate's own names


def parse_sni_cert_key(value: str) -> SniCertKey:
    """CERT,KEY[:NAME,NAME...], as the apiserver's NamedCertKey flag."""
    files, _, names = value.partition(":")
    cert, sep, key = files.partition(",")
    if not sep or not cert.strip() or not key.strip() or "," in key:
        raise InputError("--tls-sni-cert-key", f'invalid argument "{value}": expected '
                         "CERT,KEY or CERT,KEY:NAME,NAME...")
    return SniCertKey(cert.strip(), key.strip(),
                      tuple(n.strip().lower() for n in names.split(",") if n.strip()))


def cert_names(cert_file: str) -> tuple[str, ...]:
    """The DNS names of a PEM certificate, else its common name."""
    from cryptography import x509
    from cryptography.x509.oid import ExtensionOID, NameOID

    with open(cert_file, "rb") as handle:
        cert = x509.load_pem_x509_certificate(handle.read())
    try:
        san = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
        dns = san.value.get_values_for_type(x509.DNSName)  # type: ignore[attr-defined]
    except x509.ExtensionNotFound:
        dns = []
    if dns:
        return tuple(str(n).lower() for n in dns)
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return tuple(str(a.value).lower() for a in common)


def matches(pattern: str, server_name: str) -> bool:
    if pattern == server_name:
        return True
    if pattern.startswith("*."):
        head, dot, rest = server_name.partition(".")
        return bool(head) and bool(dot) and rest == pattern[2:]
    return False
