"""Upstream's TLS flags on the secure port (--tls-min-version, --tls-cipher-suites,
--tls-sni-cert-key): component-base's names and errors, and what a real TLS client on
127.0.0.1 is offered."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp.web
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from desched.errors import InputError
from desched.live.health import HttpServer
from desched.live.serving import SecureServing, start_secure
from desched.live.tls_options import (
    cert_names,
    matches,
    min_version,
    parse_sni_cert_key,
    split_list,
)


async def ok(_: aiohttp.web.Request) -> aiohttp.web.Response:
    return aiohttp.web.Response(text="ok")


ROUTES = {"/healthz": ok}


def certificate(tmp_path: Path, stem: str, *, dns: list[str], cn: str = "x") -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns]), critical=False)
    cert = builder.sign(key, hashes.SHA256())
    crt, pem_key = tmp_path / f"{stem}.crt", tmp_path / f"{stem}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem_key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return str(crt), str(pem_key)


@asynccontextmanager
async def serving(settings: SecureServing) -> AsyncIterator[HttpServer]:
    settings.check()
    server = await start_secure(settings, ROUTES, kubeconfig=None, context=None)
    try:
        yield server
    finally:
        await server.stop()


def handshake(port: int, *, server_name: str | None = None,
              tune: Callable[[ssl.SSLContext], None] = lambda c: None
              ) -> tuple[str | None, str, str]:
    """TLS version, cipher and the served certificate's common name, as a client sees them."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    tune(context)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=server_name) as tls:
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        cn = x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(
            NameOID.COMMON_NAME)[0].value
        cipher = tls.cipher()
        assert cipher is not None
        return tls.version(), cipher[0], str(cn)


def test_min_version_names_and_error() -> None:
    assert min_version(None) == ssl.TLSVersion.TLSv1_2  # upstream's default
    assert min_version("VersionTLS13") == ssl.TLSVersion.TLSv1_3
    assert min_version("VersionTLS10") == ssl.TLSVersion.TLSv1
    with pytest.raises(InputError) as caught:
        min_version("TLS1.3")
    assert str(caught.value) == '--tls-min-version: unknown tls version "TLS1.3"'


def test_cipher_suite_errors() -> None:
    assert split_list(["A,B", " C ", ""]) == ["A", "B", "C"]
    with pytest.raises(InputError) as caught:
        SecureServing("127.0.0.1:0", cipher_suites=("TLS_NO_SUCH_SUITE",)).check()
    assert str(caught.value) == ("--tls-cipher-suites: Cipher suite TLS_NO_SUCH_SUITE not "
                                 "supported or doesn't exist")


def test_sni_values_and_names(tmp_path: Path) -> None:
    assert parse_sni_cert_key("a.crt,a.key") == parse_sni_cert_key("a.crt, a.key:")
    assert parse_sni_cert_key("a.crt,a.key:*.Foo.com,foo.com").names == ("*.foo.com",
                                                                         "foo.com")
    for bad in ("a.crt", "a.crt,", ",a.key", "a.crt,a.key,b"):
        with pytest.raises(InputError, match=r"^--tls-sni-cert-key: invalid argument"):
            parse_sni_cert_key(bad)
    crt, _ = certificate(tmp_path, "san", dns=["A.example", "b.example"])
    assert cert_names(crt) == ("a.example", "b.example")
    crt, _ = certificate(tmp_path, "cn", dns=[], cn="only.example")
    assert cert_names(crt) == ("only.example",)
    assert matches("*.foo.com", "a.foo.com") and not matches("*.foo.com", "a.b.foo.com")
    assert not matches("*.foo.com", "foo.com") and matches("foo.com", "foo.com")


@pytest.mark.asyncio
async def test_min_version_is_enforced() -> None:
    async with serving(SecureServing("127.0.0.1:0", min_tls_version="VersionTLS13")) as server:
        version, _, _ = await asyncio.to_thread(handshake, server.port)
        assert version == "TLSv1.3"

        def tls12_only(context: ssl.SSLContext) -> None:
            context.maximum_version = ssl.TLSVersion.TLSv1_2

        with pytest.raises(ssl.SSLError):
            await asyncio.to_thread(handshake, server.port, tune=tls12_only)
    async with serving(SecureServing("127.0.0.1:0")) as server:  # the default takes 1.2
        version, _, _ = await asyncio.to_thread(
            handshake, server.port,
            tune=lambda c: setattr(c, "maximum_version", ssl.TLSVersion.TLSv1_2))
        assert version == "TLSv1.2"


@pytest.mark.asyncio
async def test_cipher_suites_limit_tls12() -> None:
    suites = ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",)
    async with serving(SecureServing("127.0.0.1:0", cipher_suites=suites)) as server:
        def tls12(context: ssl.SSLContext) -> None:
            context.maximum_version = ssl.TLSVersion.TLSv1_2

        _, cipher, _ = await asyncio.to_thread(handshake, server.port, tune=tls12)
        assert cipher == "ECDHE-ECDSA-AES256-GCM-SHA384"

        def other_suite(context: ssl.SSLContext) -> None:
            tls12(context)
            context.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")

        with pytest.raises(ssl.SSLError):
            await asyncio.to_thread(handshake, server.port, tune=other_suite)
        version, _, _ = await asyncio.to_thread(handshake, server.port)
        assert version == "TLSv1.3"  # TLS 1.3's suites stay on, as in Go


@pytest.mark.asyncio
async def test_sni_certificates(tmp_path: Path) -> None:
    main_crt, main_key = certificate(tmp_path, "main", dns=["localhost"], cn="main")
    own_crt, own_key = certificate(tmp_path, "own", dns=["own.example"], cn="own")
    wild_crt, wild_key = certificate(tmp_path, "wild", dns=["x.example"], cn="wild")
    settings = SecureServing(
        "127.0.0.1:0", cert_file=main_crt, key_file=main_key,
        sni_cert_keys=(f"{own_crt},{own_key}", f"{wild_crt},{wild_key}:*.apps.example"))
    async with serving(settings) as server:
        async def served(name: str | None) -> str:
            return (await asyncio.to_thread(handshake, server.port, server_name=name))[2]

        assert await served("own.example") == "own"  # the certificate's own name
        assert await served("OWN.example") == "own"
        assert await served("a.apps.example") == "wild"  # the names given replace its own
        assert await served("x.example") == "main"
        assert await served(None) == "main"
    with pytest.raises(InputError, match=r"^--tls-sni-cert-key: cannot read"):
        SecureServing("127.0.0.1:0", sni_cert_keys=(f"{tmp_path}/nope.crt,{own_key}",)).check()
