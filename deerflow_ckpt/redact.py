"""Keep passwords out of everything ckpt prints: messages pass through `redact` on their way out."""

from __future__ import annotations

import re

MASK = "***"
# userinfo in a URL: scheme://user:password@host
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@\s]*)(?P<tail>@)")
# key=value conninfo and ?password= query parameters; sslpassword unlocks the client's SSL key
_KEYWORD_PASSWORD = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)(?P<password>'(?:[^'\\]|\\.)*'|[^\s&]+)", re.I)

_known_secrets: set[str] = set()
# Shorter secrets would mask ordinary letters everywhere ("p" in "ckpt"); in a DSN the patterns above
# mask them anyway.
MIN_REMEMBERED = 4


def url_password(url: str) -> str | None:
    """The password of `scheme://user:password@host…` read the forgiving way: up to the last '@' before
    the query, so an unencoded '@', '/' or space in it is still all password (what the strict parsers
    and the pattern above would leave partly visible)."""
    start = url.find("://")
    if start < 0:
        return None
    rest = url[start + 3 :].split("?", 1)[0]
    userinfo, at, _ = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1] or None


def remember_secret(secret: str | None) -> None:
    """Register a secret (a DSN's password) so every later message has it masked.

    Its pieces between an '@', '/', ':' or space are registered too: a parser that stops at one of them
    echoes the rest ("failed to resolve host 'rest@db'").
    """
    if not secret:
        return
    for piece in (secret, *re.split(r"[@/:\s]", secret)):
        if len(piece) >= MIN_REMEMBERED:
            _known_secrets.add(piece)


def redact(message: str) -> str:
    """Mask URL passwords, password= parameters and every remembered secret in `message`."""
    for secret in sorted(_known_secrets, key=len, reverse=True):
        message = message.replace(secret, MASK)
    message = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}{m['tail']}", message)
    message = _KEYWORD_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", message)
    for secret in sorted(_known_secrets, key=len, reverse=True):
        message = message.replace(secret, MASK)
    return message
