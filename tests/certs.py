"""Certificates for the TLS tests, made with the openssl command (Debian's openssl package).

`make_cert(directory, stem, cn, sans)` makes a self-signed EC certificate and its key and returns
(cert path, key path, the certificate's DER); OPENSSL is the command's path, None without it
(the tests that need it skip, saying so)."""

import shutil
import ssl
import subprocess

OPENSSL = shutil.which("openssl")


def openssl(*args):
    result = subprocess.run([OPENSSL, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def make_cert(directory, stem, cn=None, sans=None):
    cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
    subject = f"/O=leastload tests/CN={cn}" if cn else "/O=leastload tests"
    args = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", subject]
    if sans:
        args += ["-addext", "subjectAltName=" + ",".join(sans)]
    openssl(*args)
    return str(cert), str(key), ssl.PEM_cert_to_DER_cert(cert.read_text())
