"""Keep passwords out of everything ckpt prints: one masking rule, applied by `redact` to every message,
report line and piece of config text on its way out.

- A secret remembered when ckpt read it is masked wherever it stands: every reading of a DSN's password
  (`remember_dsn`), and a config's credential values (`remember_config_credentials`, called on every
  config loaded, and `remember_credential` for what lint-config resolves a `$VAR` to).
- A URL's password, `scheme://user:PASSWORD@host`, up to the last '@' of its run of non-space characters,
  so an unencoded '@' or '/' in it is masked too.
- The value of any key ending in `password` written `key=value` (libpq conninfo, a URL's query),
  `key: value` (YAML) or `'key': 'value'` (a Python or JSON mapping).

Every step is one pass over the text: a message of megabytes is masked in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from urllib.parse import unquote

MASK = "***"

_known_secrets: set[str] = set()
# Short URL passwords with the user before them: (`user:pw@`, `user:***@`).
_known_credentials: set[tuple[str, str]] = set()
# Shorter secrets would mask ordinary letters everywhere ("p" in "ckpt"); where a short password stands in a
# DSN or after a password key, the patterns mask it anyway.
MIN_REMEMBERED = 4

# Keys whose value is a DSN, which may hold a password (DeerFlow's database, checkpointer and redis settings).
DSN_KEYS = frozenset({"postgres_url", "redis_url", "connection_string"})
# Keys whose whole value is a credential, and those of them that name a password (remembered even if a word).
_CREDENTIAL_KEY = re.compile(r"password|passwd|^pass$|^pwd$|secret|token|api_?key", re.IGNORECASE)
_PASSWORD_KEY_NAME = re.compile(r"password|passwd|^pass$|^pwd$", re.IGNORECASE)
# A placeholder, not a secret: one word of letters, lower case or capitalised.
_ORDINARY_WORD = re.compile(r"[A-Za-z][a-z]*")

_PASSWORD_KEY = re.compile(r"password", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s")
_LINE_END = re.compile(r"[\r\n]")
# A quoted value's body: backslash escapes, up to the closing quote or the line's end.
_QUOTED_BODY = {quote: re.compile(rf"(?:[^{quote}\\\r\n]|\\.)*") for quote in ("'", '"')}
# Where an unquoted value ends: conninfo and URL queries stop at whitespace ('&' in a query); YAML runs on.
_UNQUOTED_END = {"=": re.compile(r"[\s&]"), ":": _LINE_END}
# A quoted conninfo value's escapes: libpq reads `\'` as `'`.
_BACKSLASHED = re.compile(r"\\(.)")


def remember_secret(secret: str | None) -> None:
    """Register a secret so every later message has it masked (too short a one is left to the patterns)."""
    if secret and len(secret) >= MIN_REMEMBERED:
        _known_secrets.add(secret)


def url_password(url: str) -> str | None:
    """The password of `scheme://user:password@host…` read the forgiving way: up to the last '@' before
    the query, so an unencoded '@', '/' or space in it is still all password."""
    start = url.find("://")
    if start < 0:
        return None
    rest = url[start + 3 :].split("?", 1)[0]
    userinfo, at, _ = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1] or None


def _libpq_url_password(url: str) -> str | None:
    """The password as libpq reads a URL: the credentials end at the first '@' before any '/'."""
    start = url.find("://")
    if start < 0:
        return None
    rest = url[start + 3 :]
    end = next((i for i, char in enumerate(rest) if char in "@/"), len(rest))
    if end == len(rest) or rest[end] != "@" or ":" not in rest[:end]:
        return None
    return rest[:end].split(":", 1)[1] or None


def dsn_passwords(dsn: str) -> set[str]:
    """Every reading of a DSN's password, as written and percent-decoded: libpq's, the forgiving one, and
    each `password=` or `sslpassword=` value (conninfo or query)."""
    found = {url_password(dsn), _libpq_url_password(dsn)}
    for start, end in _keyword_spans(dsn):
        found.update((dsn[start:end], _BACKSLASHED.sub(r"\1", dsn[start:end])))
    readings = {reading for reading in found if reading}
    return readings | {unquote(reading) for reading in readings}


def remember_dsn(dsn: str) -> None:
    """Remember every reading of a DSN's password (psycopg's errors and DeerFlow's warnings may quote it)."""
    for reading in dsn_passwords(dsn):
        remember_secret(reading)
    # Too short to mask alone, a URL password is still masked between its user and '@' wherever that stands,
    # even where no '://' is left (a DSN taken as a path reads 'postgresql:/u:abc@h/db').
    start = dsn.find("://")
    if start >= 0:
        user, colon, _ = dsn[start + 3 :].partition(":")
        for password in {url_password(dsn), _libpq_url_password(dsn)}:
            if colon and password and len(password) < MIN_REMEMBERED and "/" not in user and "@" not in user:
                _known_credentials.add((f"{user}:{password}@", f"{user}:{MASK}@"))


def remember_config_credentials(data: object) -> None:
    """Remember the credentials a loaded config holds where they stand (see `remember_credential`): a DSN's
    password, and the value of a password, secret, token or API key, at any depth. `$VAR` references are no
    secret; lint-config remembers what they resolve to."""
    pending: list[tuple[tuple[object, ...], object]] = [((), data)]
    seen: set[int] = set()
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if not value.startswith("$"):
                remember_credential(path, value)
        elif isinstance(value, dict | list) and id(value) not in seen:
            seen.add(id(value))  # an alias repeats a node: walk it once
            if isinstance(value, dict):
                pending.extend(((*path, key), item) for key, item in value.items())
            else:
                pending.extend(((*path, index), item) for index, item in enumerate(value))


def is_credential_path(path: Sequence[object]) -> bool:
    """True when a value at `path` (keys from the top of a config) may be or hold a credential: some key on
    the way is a DSN key or names a credential. Such a value is never shown, whatever it is."""
    return any(key in DSN_KEYS or (isinstance(key, str) and _CREDENTIAL_KEY.search(key)) for key in path)


def remember_credential(path: Sequence[object], value: str) -> None:
    """Remember the secret a config value at `path` is or holds (a resolved `$VAR` too), and nothing else.

    A DSN key's value (or a DSN-shaped text inside a mapping or list DeerFlow refuses there) gives its
    password; a password key's value is remembered whole; a secret, token or API key's too unless it is one
    ordinary word (none, dummy, Disabled), which would mask that word everywhere. The user, host, port or
    database name inside a mapping `postgres_url` is no secret and is left alone."""
    keys = [key for key in path if isinstance(key, str)]
    last = keys[-1] if keys else None  # a list item stands under its list's key
    if last is not None and _PASSWORD_KEY_NAME.search(last):
        remember_secret(value)
    elif last is not None and _CREDENTIAL_KEY.search(last):
        if not _ORDINARY_WORD.fullmatch(value):
            remember_secret(value)
    elif any(key in DSN_KEYS for key in keys):
        if last in DSN_KEYS or "://" in value or "=" in value:
            remember_dsn(value)
        if last in DSN_KEYS and path[-1] != last and "://" not in value and not _ORDINARY_WORD.fullmatch(value):
            # An item of a list DeerFlow refuses as a DSN has no key to say what it is: it may be the password.
            remember_secret(value)


def redact(message: str) -> str:
    """`message` with every password masked (see the module's rule), in time linear in its length."""
    # Longest first: a secret that holds a shorter one is masked whole.
    for secret in sorted((secret for secret in _known_secrets if secret in message), key=len, reverse=True):
        message = message.replace(secret, MASK)
    for credential, masked in _known_credentials:
        message = message.replace(credential, masked)
    spans = sorted([*_url_spans(message), *_keyword_spans(message)])
    if not spans:
        return message
    parts: list[str] = []
    done = 0
    for start, end in spans:
        if end <= done:
            continue
        parts.append(message[done : max(start, done)])
        parts.append(MASK)
        done = end
    parts.append(message[done:])
    return "".join(parts)


def _url_spans(text: str) -> Iterator[tuple[int, int]]:
    """Where URL passwords stand: after `://user:`, up to the last '@' of the run of non-space characters.

    Each run is searched for its end and its last '@' once, however many `://` it holds."""
    position, run_end, last_at = 0, -1, -1
    while (scheme_end := text.find("://", position)) >= 0:
        start = scheme_end + 3
        if scheme_end >= run_end:
            space = _WHITESPACE.search(text, start)
            run_end = space.start() if space else len(text)
            last_at = text.rfind("@", start, run_end)
        position = start
        if last_at < start:
            continue
        colon = text.find(":", start, last_at)
        # A user name holds no '/' or '@': "https://host/a:b@c" has no credentials.
        if colon < 0 or any(char in text[start:colon] for char in "/@"):
            continue
        yield colon + 1, last_at
        position = last_at + 1


def _keyword_spans(text: str) -> Iterator[tuple[int, int]]:
    """Where the values of keys ending in `password` stand: `password=v`, `password: v`, `'password': 'v'`."""
    length, consumed = len(text), 0
    for match in _PASSWORD_KEY.finditer(text):
        if match.start() < consumed:
            continue  # inside a value already masked
        index = match.end()
        if index < length and text[index] in "'\"":
            index += 1  # a quoted key's closing quote
        while index < length and text[index] in " \t":
            index += 1
        if index >= length or text[index] not in "=:":
            continue
        separator = text[index]
        index += 1
        while index < length and text[index] in " \t":
            index += 1
        if index >= length or text[index] in "\r\n":
            continue
        if text[index] in "'\"":
            body = _QUOTED_BODY[text[index]].match(text, index + 1)
            assert body is not None  # the pattern matches the empty string
            start, end = index + 1, body.end()
        else:
            stop = _UNQUOTED_END[separator].search(text, index)
            start, end = index, stop.start() if stop else length
        if end > start:
            yield start, end
        consumed = end
