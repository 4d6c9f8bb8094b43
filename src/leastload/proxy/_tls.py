"""The listener's TLS: certificate/key pairs chosen by SNI, reloaded without dropping a connection.

`CertificateStore([(cert_file, key_file), ...])` loads each pair into an `ssl.SSLContext` of the
same settings: TLS 1.2 and 1.3 only, ALPN `http/1.1`, session tickets on (TLS 1.2's and 1.3's,
OpenSSL's defaults), no compression, no renegotiation. `store.context` is the one context a
listener is given (`loop.create_server(ssl=...)`, `loop.start_tls(...)`): its SNI callback
hands each new connection the context of the pair whose names match the name the client asked
for (exactly, or by a wildcard `*.example.com` over one label), else the first pair's (also for
a client that names no host). Its session tickets are the listener context's own, so a ticket
stays good whichever pair served it.

A pair's host names come from its certificate: the DNS names of its subjectAltName, or, when it
has none, its subject's CN (as OpenSSL's host check does). They are read from the certificate's
DER with the small reader below: the standard library's `ssl` loads certificates but only reads
names out of a peer's (`getpeercert()`; `ssl._ssl._test_decode_cert` is private), and the
`cryptography` package would be a dependency for twenty lines of ASN.1. A pair given
`names=[...]` is chosen for those instead.

`store.reload()` reads every file again and swaps the pairs at once: new connections get the
new certificates, a connection already open keeps the context it was handed. A file that does
not load, at start or at a reload, is a `UserError` (cmdline.py) of one line naming the file;
a reload that fails changes nothing.
"""

import ssl
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from ..cmdline import UserError

ALPN = ("http/1.1",)
PairSpec = Union[Tuple[str, str], Tuple[str, str, Sequence[str]]]


class Pair(NamedTuple):
    """One loaded certificate: its files, the host names it is chosen for, its context."""
    cert_file: str
    key_file: str
    names: Tuple[str, ...]
    context: ssl.SSLContext


def server_context() -> ssl.SSLContext:
    """A server context with the store's settings and no certificate yet."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    context.options &= ~ssl.OP_NO_TICKET
    context.set_alpn_protocols(list(ALPN))
    return context


class CertificateStore:
    """Several certificate/key pairs behind one listener context (see the module's doc)."""

    def __init__(self, pairs: Sequence[PairSpec]) -> None:
        if not pairs:
            raise UserError("TLS needs at least one certificate and its key")
        self._specs: List[Tuple[str, str, Optional[Sequence[str]]]] = [
            (p[0], p[1], p[2] if len(p) > 2 else None) for p in pairs]
        self.pairs: List[Pair] = []
        self._exact: Dict[str, Pair] = {}
        self._wildcard: Dict[str, Pair] = {}
        self.context = server_context()
        self.context.sni_callback = self._on_server_name
        self._load()
        self.reloads = 0  # successful reloads since start

    def reload(self) -> None:
        """Reads every pair's files again and swaps them in for new connections; on any error,
        UserError naming the file, and the pairs in use stay."""
        self._load()
        self.reloads += 1

    def _load(self) -> None:
        loaded = [load_pair(cert, key, names) for cert, key, names in self._specs]
        exact: Dict[str, Pair] = {}
        wildcard: Dict[str, Pair] = {}
        for pair in loaded:
            for name in pair.names:
                if name.startswith("*."):
                    wildcard.setdefault(name[2:], pair)  # the first pair listed wins a name
                elif "*" not in name:
                    exact.setdefault(name, pair)
        first = loaded[0]
        # the listener context serves the first pair too: the SNI callback replaces it for every
        # connection (it runs for a client that names no host as well), this is in case it did not
        self.context.load_cert_chain(first.cert_file, first.key_file, password=_no_password)
        self.pairs, self._exact, self._wildcard = loaded, exact, wildcard

    def choose(self, server_name: Optional[str]) -> Pair:
        """The pair for a client's SNI name (None: it named none): exact, then wildcard, then the first."""
        if server_name:
            name = _normalized(server_name)
            pair = self._exact.get(name)
            if pair is not None:
                return pair
            _, dot, parent = name.partition(".")
            if dot:
                pair = self._wildcard.get(parent)
                if pair is not None:
                    return pair
        return self.pairs[0]

    def _on_server_name(self, connection: Union[ssl.SSLObject, ssl.SSLSocket], server_name: Optional[str],
                        _context: ssl.SSLContext) -> None:
        connection.context = self.choose(server_name).context

    def status(self) -> List[Dict[str, object]]:
        return [{"cert": p.cert_file, "key": p.key_file, "names": list(p.names)} for p in self.pairs]


def _normalized(name: str) -> str:
    name = name.rstrip(".").lower()
    try:
        return name.encode("idna").decode("ascii")  # a U-label as its A-label, as certificates name it
    except UnicodeError:
        return name


def _no_password() -> bytes:
    raise _EncryptedKey()


class _EncryptedKey(Exception):
    pass


def load_pair(cert_file: str, key_file: str, names: Optional[Sequence[str]] = None) -> Pair:
    """One pair loaded into its own context; UserError naming the file that does not load."""
    try:
        with open(cert_file, "rb") as f:
            pem = f.read()
    except OSError as exc:
        raise UserError(f"TLS certificate {cert_file}: cannot read it: {exc.strerror or exc}") from None
    try:
        der = ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
        found = host_names(der)
    except (ValueError, UnicodeDecodeError, IndexError) as exc:
        raise UserError(f"TLS certificate {cert_file}: not a certificate in PEM form ({exc})") from None
    try:
        with open(key_file, "rb"):
            pass
    except OSError as exc:
        raise UserError(f"TLS key {key_file}: cannot read it: {exc.strerror or exc}") from None
    context = server_context()
    try:
        context.load_cert_chain(cert_file, key_file, password=_no_password)
    except _EncryptedKey:
        raise UserError(f"TLS key {key_file}: encrypted with a passphrase, which the proxy cannot ask "
                        "for: give it the key unencrypted (openssl pkey -in KEY -out PLAIN)") from None
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise UserError(f"TLS key {key_file}: not the key of the certificate {cert_file}") from None
        raise UserError(f"TLS key {key_file}: not a private key in PEM form for {cert_file} "
                        f"(OpenSSL: {exc.reason or exc})") from None
    chosen = tuple(_normalized(n) for n in names) if names is not None else found
    return Pair(cert_file, key_file, chosen, context)


# ---- the certificate's names, from its DER ------------------------------------------------------

_CN = bytes.fromhex("550403")          # 2.5.4.3, commonName
_SAN = bytes.fromhex("551d11")         # 2.5.29.17, subjectAltName
_SEQUENCE, _SET, _OID, _OCTETS, _BOOLEAN = 0x30, 0x31, 0x06, 0x04, 0x01
_DNS_NAME = 0x82                       # GeneralName's [2] IMPLICIT IA5String
_EXTENSIONS = 0xA3                     # tbsCertificate's [3] EXPLICIT


def _element(der: bytes, pos: int, end: int) -> Tuple[int, int, int]:
    """The DER element at `pos`: (tag, start of its content, end of it), within `end`."""
    if pos + 2 > end:
        raise ValueError("truncated DER")
    tag, first = der[pos], der[pos + 1]
    pos += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if not 1 <= count <= 4 or pos + count > end:
            raise ValueError("bad DER length")
        length = int.from_bytes(der[pos:pos + count], "big")
        pos += count
    if pos + length > end:
        raise ValueError("DER element runs past its parent")
    return tag, pos, pos + length


def _children(der: bytes, start: int, end: int) -> List[Tuple[int, int, int]]:
    found = []
    while start < end:
        element = _element(der, start, end)
        found.append(element)
        start = element[2]
    return found


def host_names(der: bytes) -> Tuple[str, ...]:
    """The DNS names of a certificate's subjectAltName, or its subject's CN when it has none
    (lowercased, in order, each once)."""
    tag, start, end = _element(der, 0, len(der))
    if tag != _SEQUENCE:
        raise ValueError("not a certificate")
    tbs_tag, tbs_start, tbs_end = _children(der, start, end)[0]
    if tbs_tag != _SEQUENCE:
        raise ValueError("not a certificate")
    fields = _children(der, tbs_start, tbs_end)
    if fields and fields[0][0] == 0xA0:  # the version, when not v1
        fields = fields[1:]
    if len(fields) < 6:
        raise ValueError("a certificate's fields are missing")
    subject = fields[4]
    dns: List[str] = []
    for tag, ext_start, ext_end in fields[6:]:
        if tag != _EXTENSIONS:
            continue
        (_, seq_start, seq_end), = _children(der, ext_start, ext_end)
        for _, x_start, x_end in _children(der, seq_start, seq_end):
            parts = _children(der, x_start, x_end)
            oid, value = parts[0], parts[-1]
            if der[oid[1]:oid[2]] != _SAN or value[0] != _OCTETS:
                continue
            (_, names_start, names_end), = _children(der, value[1], value[2])
            for name_tag, n_start, n_end in _children(der, names_start, names_end):
                if name_tag == _DNS_NAME:
                    dns.append(der[n_start:n_end].decode("ascii").lower())
    if dns:
        return tuple(dict.fromkeys(dns))
    common: List[str] = []
    for _, rdn_start, rdn_end in _children(der, subject[1], subject[2]):
        for _, a_start, a_end in _children(der, rdn_start, rdn_end):
            oid, value = _children(der, a_start, a_end)[:2]
            if der[oid[1]:oid[2]] == _CN:
                common.append(der[value[1]:value[2]].decode("utf-8").lower())
    return tuple(dict.fromkeys(common))
