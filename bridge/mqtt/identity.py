"""How a client's user name was established, recorded with its session, its delayed will and its
publications so that the ACL rules, listener control and MQMD UserIdentifier trust only a checked name.

``PASSWORD``: verified against the password database; ``CERTIFICATE``: the subject CN of a TLS client
certificate the listener's CA verified (``use_identity_as_username``); ``ROUTE``: a route's ``acl_user``
(the rules file's); ``CLAIMED``: what the client said (no password database), or no user name. ``None``
stands for a session, will or message stored by an mqbridge that did not record it: treated as before (a
password check, if a password database exists now; never trusted for MQMD UserIdentifier).
"""
from __future__ import annotations

PASSWORD = "password"
CERTIFICATE = "certificate"
ROUTE = "route"
CLAIMED = ""


def checked(via: str | None) -> bool:
    """Whether a user name established this way was checked (a password or a certificate)."""
    return via == PASSWORD or via == CERTIFICATE


def certificate_user(peercert: dict[str, object] | None) -> tuple[str | None, str]:
    """The user name a verified client certificate gives (its subject's one CN), or None and why not."""
    if not peercert:
        return None, "no client certificate"
    subject = peercert.get("subject") or ()
    names = [value for rdn in subject for key, value in rdn if key == "commonName"]  # type: ignore[attr-defined]
    if not names:
        return None, "the client certificate's subject has no CN"
    if len(names) > 1:   # which one names the user would be the certificate issuer's guess
        return None, f"the client certificate's subject has {len(names)} CNs"
    name = str(names[0])
    if not name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return None, "the client certificate's CN is empty or has control characters"
    return name, ""
