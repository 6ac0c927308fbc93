"""Who may connect: the anonymous policy per listener, user names checked against salted hashes (the
config's ``users`` and the ``password_file``), and a throttle on failed logins.

Fails closed: a listener accepts clients without a user name only when ``BrokerConfig.anonymous_allowed``
says so; with any user configured a given user name must verify. The throttle counts failed logins per
client address (IPv6 by /64, what one host usually holds) and per user name; past ``login_failures``
(twice that for a user name) each further failure locks that key out for 1 s, doubling up to
``login_lockout_max``. A locked-out attempt is refused (CONNACK 5) without its password being checked, so
guesses from one address fall to about one per ``login_lockout_max``, however fast they come. A user
name's lockout does not stop the addresses that user logged in from before (the device keeps working
while its name is guessed at elsewhere). Counts are forgotten 10 x ``login_lockout_max`` after the last
failure. Nothing here waits: the checks run on the event loop (101 PBKDF2 rounds cost ~0.1 ms; a
verified password is remembered as an HMAC under a per-process key, so a reconnecting client costs no
PBKDF2). Failed and throttled logins are logged at warning level, at most LOG_BURST lines per
LOG_WINDOW seconds, then one line counting the rest.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from bridge.config import BrokerConfig
from bridge.mqtt import identity
from bridge.mqtt.acl import Acl, Grants, read_acl
from bridge.mqtt.packets import ConnackCode
from bridge.mqtt.passwords import PasswordFileError, PasswordHash, make_hash, parse_hash, read_password_file

log = logging.getLogger("mqbridge.auth")

MAX_TRACKED = 10_000      # addresses / user names / known-good pairs kept by the throttle (oldest dropped)
LOG_BURST = 20
LOG_WINDOW = 10.0
SLOW_CHECK_ITERATIONS = 20_000   # above, one failed check blocks the loop for milliseconds: warned at load


def address_key(peer: str) -> str:
    """The throttle's key for a peer ``host:port``: the IPv4 address, or the IPv6 /64."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    host = host.strip("[]").split("%")[0]
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(ipaddress.IPv6Network((addr, 64), strict=False))
    return str(addr)


@dataclass(slots=True)
class _Failures:
    count: int = 0
    last: float = 0.0
    locked_until: float = 0.0


class LoginThrottle:
    """Failure counts per address and per user name, and the lockouts they lead to."""

    def __init__(self, failures: int, lockout_max: float, clock: Callable[[], float]) -> None:
        self.address_failures = failures
        self.user_failures = 2 * failures
        self.lockout_max = lockout_max
        self.forget_after = 10 * lockout_max
        self.clock = clock
        self._addresses: OrderedDict[str, _Failures] = OrderedDict()
        self._users: OrderedDict[str, _Failures] = OrderedDict()
        self._known_good: OrderedDict[tuple[str, str], None] = OrderedDict()

    def _current(self, table: OrderedDict[str, _Failures], key: str, now: float) -> _Failures | None:
        entry = table.get(key)
        if entry is not None and now - entry.last > self.forget_after:
            del table[key]
            return None
        return entry

    def locked(self, address: str, user: str) -> str:
        """'' if a login of ``user`` from ``address`` may be checked now, else why not."""
        now = self.clock()
        entry = self._current(self._addresses, address, now)
        if entry is not None and now < entry.locked_until:
            return f"address {address} locked for {entry.locked_until - now:.1f} s after {entry.count} failed logins"
        entry = self._current(self._users, user, now)
        if entry is not None and now < entry.locked_until and (user, address) not in self._known_good:
            return f"user {user!r} locked for {entry.locked_until - now:.1f} s after {entry.count} failed logins"
        return ""

    def _fail(self, table: OrderedDict[str, _Failures], key: str, allowed: int, now: float) -> int:
        entry = self._current(table, key, now)
        if entry is None:
            entry = table[key] = _Failures()
            while len(table) > MAX_TRACKED:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        entry.count += 1
        entry.last = now
        beyond = entry.count - allowed
        if beyond > 0:
            entry.locked_until = now + min(self.lockout_max, 2.0 ** min(beyond - 1, 30))
        return entry.count

    def failed(self, address: str, user: str) -> int:
        """Counts a failed login; returns the address's failures so far."""
        now = self.clock()
        self._fail(self._users, user, self.user_failures, now)
        return self._fail(self._addresses, address, self.address_failures, now)

    def succeeded(self, address: str, user: str) -> None:
        # no count is reset: an attacker holding one account could otherwise reset its address's count
        pair = (user, address)
        known = self._known_good
        if pair in known:
            known.move_to_end(pair)
            return
        known[pair] = None
        while len(known) > MAX_TRACKED:
            known.popitem(last=False)


class RateLimitedLog:
    """At most ``burst`` warnings per ``window`` seconds; the rest are counted in one later line."""

    def __init__(self, clock: Callable[[], float], burst: int = LOG_BURST, window: float = LOG_WINDOW) -> None:
        self.clock = clock
        self.burst = burst
        self.window = window
        self._start = -window
        self._logged = 0
        self.suppressed = 0

    def tick(self) -> None:
        """Start a new window if the current one is over (reporting what it suppressed)."""
        now = self.clock()
        if now - self._start >= self.window:
            if self.suppressed:
                log.warning("%d more failed or throttled logins were not logged in the last %.0f s",
                            self.suppressed, now - self._start)
            self._start = now
            self._logged = 0
            self.suppressed = 0

    def warning(self, msg: str, *args: object) -> None:
        self.tick()
        if self._logged < self.burst:
            self._logged += 1
            log.warning(msg, *args)
        else:
            self.suppressed += 1


class Authenticator:
    """The CONNECT credentials check. ``check`` returns None (accepted) or the CONNACK refusal code."""

    def __init__(self, config: BrokerConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.throttle = LoginThrottle(config.limits.login_failures, config.limits.login_lockout_max, clock)
        self.log = RateLimitedLog(clock)
        self._secret = os.urandom(32)
        self._verified: dict[str, tuple[PasswordHash, bytes]] = {}
        # a hash to spend the same work on for an unknown user name as for a known one
        self._decoy = make_hash(os.urandom(16))
        self._anonymous: dict[str, bool] = {}
        self.users = self.read_users()
        self.acl = self.read_acl()
        self._report_listeners()

    # -- users --------------------------------------------------------------------------------------

    def read_users(self) -> dict[str, PasswordHash]:
        """The config's users and the password file's, validated; PasswordFileError if they cannot be used."""
        users = {name: parse_hash(stored) for name, stored in self.config.users.items()}
        path = self.config.password_file
        if path is not None:
            from_file = read_password_file(path)
            both = sorted(set(users) & set(from_file))
            if both:
                raise PasswordFileError([f"{path}: user {u!r} is also in the configuration's users" for u in both])
            users.update(from_file)
        slow = sorted(u for u, h in users.items() if h.iterations > SLOW_CHECK_ITERATIONS)
        if slow:
            log.warning("users %s: more than %d PBKDF2 iterations, each failed login blocks the broker for "
                        "milliseconds", ", ".join(slow[:5]) + (" ..." if len(slow) > 5 else ""),
                        SLOW_CHECK_ITERATIONS)
        return users

    def install(self, users: dict[str, PasswordHash]) -> list[str]:
        """Use ``users`` from now on (connected clients stay); returns what changed, for the reload answer."""
        old = self.users
        added = sorted(set(users) - set(old))
        removed = sorted(set(old) - set(users))
        changed = sorted(u for u in set(users) & set(old) if users[u] != old[u])
        self.users = users
        self._verified = {u: v for u, v in self._verified.items() if users.get(u) == v[0]}
        if not (added or removed or changed):
            return []
        parts = [f"{label} {', '.join(names)}" for label, names in
                 (("added", added), ("removed", removed), ("password changed", changed)) if names]
        line = f"users: {'; '.join(parts)}"
        log.info("%s", line)
        return [line]

    def reload(self) -> list[str]:
        """Re-read the password file (``mqbridge reload``); PasswordFileError leaves the old users."""
        return self.install(self.read_users())

    # -- ACL ----------------------------------------------------------------------------------------

    def read_acl(self) -> Acl | None:
        """The ACL file's rules (None: no file, every client may publish and read everything); AclError."""
        path = self.config.acl_file
        return None if path is None else read_acl(path)

    def install_acl(self, acl: Acl | None) -> list[str]:
        old, self.acl = self.acl, acl
        if old == acl:
            return []
        line = "acl: " + (f"{acl.source}: {len(acl.users)} users, {len(acl.patterns)} patterns" if acl else "none")
        log.info("%s", line)
        return [line]

    def client_id_refused(self, client_id: str, user: str | None, via: str | None) -> str | None:
        """Why ``client_id`` may not be used by ``user`` (established ``via``, identity.py) under
        ``client_id_pattern`` (None: it may): so that no one takes over another user's session and its
        queued messages."""
        pattern = self.config.client_id_pattern
        if pattern is None:
            return None
        if "%u" in pattern:
            if user is None or not self.user_counts(via):
                return f"client_id_pattern {pattern!r} needs a user name checked by a password or a certificate"
            pattern = pattern.replace("%u", re.escape(user))
        if re.fullmatch(pattern, client_id) is None:
            return f"client id {client_id!r} does not match client_id_pattern {self.config.client_id_pattern!r}"
        return None

    def user_counts(self, via: str | None) -> bool:
        """Whether a user name established ``via`` (identity.py) is one the ACL and %u may trust: a
        certificate's, a route's acl_user, or one a password database checks (a stored session from before
        ``via`` was recorded: as then, when there is a password database)."""
        return via in (identity.CERTIFICATE, identity.ROUTE) or (via != identity.CLAIMED and bool(self.users))

    def grants(self, client_id: str, user: str | None, via: str | None) -> Grants | None:
        """A client's ACL rules. A user name counts only where it was checked (``user_counts``): otherwise
        any client could claim any name, so it gets the anonymous rules."""
        if self.acl is None:
            return None
        return self.acl.grants(client_id, user if self.user_counts(via) else None)

    # -- anonymous policy ---------------------------------------------------------------------------

    def _report_listeners(self) -> None:
        for listener in self.config.listeners:
            where = f"listener {listener.label()}"
            if listener.tls is not None and listener.tls.use_identity_as_username:
                log.info("%s: the user name is the client certificate's CN (use_identity_as_username)", where)
            elif self.config.anonymous_allowed(listener):
                if not listener.loopback_only:
                    log.warning("%s on %s accepts clients without a user name (allow_anonymous)", where,
                                listener.host or "every interface")
            elif not self.users and self.config.password_file is None:
                log.warning("%s accepts no client: anonymous clients are refused and no users are configured "
                            "(set password_file, or allow_anonymous: true)", where)

    def anonymous_allowed(self, listener_label: str) -> bool:
        """By the label a connection carries; a label no configured listener has is refused."""
        known = self._anonymous.get(listener_label)
        if known is None:
            known = self._resolve(listener_label)
            if len(self._anonymous) < 1000:
                self._anonymous[listener_label] = known
        return known

    def _resolve(self, label: str) -> bool:
        config = self.config
        for listener in config.listeners:
            if listener.label() == label:
                return config.anonymous_allowed(listener)
        port_text = label.rsplit(":", 1)[-1]
        if port_text.isdigit():   # a listener of config port 0 is labelled with the port it bound
            for listener in config.listeners:
                if listener.port == 0 and listener.label(int(port_text)) == label:
                    return config.anonymous_allowed(listener)
        return False

    # -- the check ----------------------------------------------------------------------------------

    def certificate_login(self, listener: str, peer: str, client_id: str,
                          peercert: dict[str, object] | None) -> str | None:
        """A listener with use_identity_as_username: the user its client's verified certificate names (the
        CONNECT's user name and password are not used, as in mosquitto), or None: refused (not authorized)."""
        self.log.tick()
        user, why = identity.certificate_user(peercert)
        if user is None:
            self.log.warning("client %r from %s refused on %s: %s (use_identity_as_username)", client_id, peer,
                             listener, why)
        return user

    def check(self, listener: str, peer: str, client_id: str, user: str | None,
              password: bytes | None) -> ConnackCode | None:
        self.log.tick()
        if user is None:
            if self.anonymous_allowed(listener):
                return None
            self.log.warning("client %r from %s refused on %s: no user name (anonymous clients are not "
                             "allowed there)", client_id, peer, listener)
            return ConnackCode.NOT_AUTHORIZED
        users = self.users
        if not users:
            if self.anonymous_allowed(listener):
                return None   # no user database: a user name is taken as given, as mosquitto does
            self.log.warning("client %r user %r from %s refused on %s: no users are configured", client_id,
                             user, peer, listener)
            return ConnackCode.NOT_AUTHORIZED
        address = address_key(peer)
        why = self.throttle.locked(address, user)
        if why:
            self.log.warning("client %r user %r from %s refused without checking: %s", client_id, user, peer, why)
            return ConnackCode.NOT_AUTHORIZED
        if self._verify(user, password or b""):
            self.throttle.succeeded(address, user)
            return None
        failures = self.throttle.failed(address, user)
        self.log.warning("failed login: client %r user %r from %s on %s (%d from this address)", client_id,
                         user, peer, listener, failures)
        return ConnackCode.BAD_USERNAME_OR_PASSWORD

    def _verify(self, user: str, password: bytes) -> bool:
        stored = self.users.get(user)
        if stored is None:
            self._decoy.verify(password)
            return False
        token = hmac.new(self._secret, password, hashlib.sha256).digest()
        remembered = self._verified.get(user)
        if remembered is not None and remembered[0] == stored and hmac.compare_digest(remembered[1], token):
            return True
        if not stored.verify(password):
            return False
        self._verified[user] = (stored, token)
        return True
