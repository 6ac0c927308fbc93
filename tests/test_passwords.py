"""Password storage and the login policy without a running gateway: files made by Debian's
mosquitto_passwd read and verified, every refused form with its message, the configuration's users and
anonymous defaults, the throttle and the rate-limited log on a fake clock, `mqbridge passwd` itself."""
from __future__ import annotations

import argparse
import base64
import hashlib
import logging
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from bridge.cli import passwd as passwd_cli
from bridge.cli.main import main as cli_main
from bridge.config import BrokerConfig, ConfigError, ListenerConfig, load_config
from bridge.mqtt import passwords as pw
from bridge.mqtt.auth import Authenticator, LoginThrottle, RateLimitedLog, address_key
from bridge.mqtt.packets import ConnackCode

MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd")
needs_mosquitto_passwd = pytest.mark.skipif(MOSQUITTO_PASSWD is None, reason="mosquitto_passwd not installed")


def mosquitto_passwd(*args: str) -> None:
    subprocess.run([MOSQUITTO_PASSWD or "mosquitto_passwd", *args], check=True, capture_output=True, timeout=30)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the file format ------------------------------------------------------------------------------------


@needs_mosquitto_passwd
def test_a_file_made_by_mosquitto_passwd_verifies_the_right_passwords_only(tmp_path):
    path = tmp_path / "passwd"
    mosquitto_passwd("-c", "-b", str(path), "alice", "wonder land")
    mosquitto_passwd("-b", str(path), "bob", "bäcker:123")
    users = pw.read_password_file(path)
    assert sorted(users) == ["alice", "bob"]
    assert users["alice"].iterations == 101 and len(users["alice"].salt) == 12
    assert users["alice"].verify(b"wonder land")
    assert users["bob"].verify("bäcker:123".encode())
    for wrong in (b"wonder lan", b"Wonder land", b"", "bäcker:123".encode()):
        assert not users["alice"].verify(wrong)
    assert not users["bob"].verify(b"wonder land")


@needs_mosquitto_passwd
def test_our_hash_of_a_password_is_what_mosquitto_computes_for_its_salt(tmp_path):
    path = tmp_path / "passwd"
    mosquitto_passwd("-c", "-b", str(path), "carol", "s3cret")
    theirs = pw.read_password_file(path)["carol"]
    ours = pw.make_hash(b"s3cret", theirs.iterations, theirs.salt)
    assert ours.encode() == path.read_text().strip().split(":", 1)[1]
    assert pw.parse_hash(ours.encode()) == theirs


def test_hashes_are_salted_and_encode_as_mosquitto_lays_them_out():
    a, b = pw.make_hash(b"same"), pw.make_hash(b"same")
    assert a.salt != b.salt and a.digest != b.digest
    iterations, salt, digest = a.encode().split("$")[2:]
    assert iterations == "101"
    assert base64.b64decode(salt) == a.salt and base64.b64decode(digest) == a.digest
    assert a.digest == hashlib.pbkdf2_hmac("sha512", b"same", a.salt, 101)
    assert pw.parse_hash(a.encode()).verify(b"same") and not pw.parse_hash(a.encode()).verify(b"Same")


@needs_mosquitto_passwd
def test_every_refused_form_is_reported_with_its_line_and_how_to_fix_it(tmp_path):
    old = tmp_path / "old"
    mosquitto_passwd("-H", "sha512", "-c", "-b", str(old), "dave", "x")   # mosquitto 1.6's $6$
    good = pw.make_hash(b"ok").encode()
    text = "\n".join([
        "# users of the plant",
        f"alice:{good}",
        "bob:builder",
        "carol:sha256:" + hashlib.sha256(b"x").hexdigest(),
        old.read_text().strip(),
        "erin:$7$101$!!!$" + base64.b64encode(b"x" * 64).decode(),
        "frank:$7$101$" + base64.b64encode(b"salt1234").decode() + "$" + base64.b64encode(b"short").decode(),
        f"alice:{good}",
        "no colon here",
        "",
    ])
    with pytest.raises(pw.PasswordFileError) as err:
        pw.parse_password_file(text, "pw")
    problems = err.value.problems
    assert problems[0].startswith("pw:3: user 'bob': plain-text passwords are refused")
    assert "mqbridge passwd" in problems[0] and "mqbridge passwd -U" in problems[0]
    assert problems[1].startswith("pw:4: user 'carol': unsalted sha256") and "mqbridge passwd" in problems[1]
    assert problems[2].startswith("pw:5: user 'dave': mosquitto 1.6 sha512")
    assert problems[3] == "pw:6: user 'erin': the salt is not base64"
    assert problems[4] == "pw:7: user 'frank': the hash has 5 bytes, SHA-512 has 64"
    assert problems[5] == "pw:8: user 'alice' is already on line 2"
    assert problems[6] == "pw:9: expected user:hash"
    assert len(problems) == 7


def test_a_missing_password_file_says_how_to_create_one(tmp_path):
    with pytest.raises(pw.PasswordFileError) as err:
        pw.read_password_file(tmp_path / "nope")
    assert "cannot read the password file" in str(err.value) and "mqbridge passwd -c" in str(err.value)


# -- the configuration -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stored,expected", [
    ("wonderland", "plain-text passwords are refused"),
    ("sha256:" + hashlib.sha256(b"builder").hexdigest(), "unsalted sha256 hashes are refused"),
])
def test_config_users_in_plain_text_or_sha256_are_refused_naming_the_line(tmp_path, stored, expected):
    path = tmp_path / "mqbridge.yaml"
    path.write_text(f"broker:\n  users:\n    ok: '{pw.make_hash(b'x').encode()}'\n    alice: '{stored}'\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:4: broker.users.alice:") and expected in msg
    assert "mqbridge passwd" in msg


def test_config_users_as_salted_hashes_load(tmp_path):
    path = tmp_path / "mqbridge.yaml"
    stored = pw.make_hash(b"x").encode()
    path.write_text(f"broker:\n  users:\n    alice: '{stored}'\n")
    assert load_config(path).broker.users == {"alice": stored}


def listener(host: str, anonymous: bool | None = None) -> ListenerConfig:
    return ListenerConfig(host=host, port=1883, allow_anonymous=anonymous)


@pytest.mark.parametrize("broker,lst,allowed", [
    ({}, listener("127.0.0.1"), True),                     # local only, nothing configured: as mosquitto 2
    ({}, listener("::1"), True),
    ({}, listener("localhost"), True),
    ({}, listener("0.0.0.0"), False),                      # reachable from elsewhere: refused by default
    ({}, listener(""), False),
    ({}, listener("10.1.2.3"), False),
    ({"users": {"u": "HASH"}}, listener("127.0.0.1"), False),   # users configured: refused even locally
    ({"password_file": "pw"}, listener("127.0.0.1"), False),
    ({"users": {"u": "HASH"}}, listener("127.0.0.1", True), True),   # unless the listener says so
    ({"allow_anonymous": True}, listener("0.0.0.0"), True),
    ({"allow_anonymous": False}, listener("127.0.0.1"), False),
    ({"allow_anonymous": True}, listener("0.0.0.0", False), False),  # the listener's setting wins
])
def test_anonymous_default(broker, lst, allowed):
    if "users" in broker:
        broker = {**broker, "users": {"u": pw.make_hash(b"x").encode()}}
    cfg = BrokerConfig.model_validate({**broker, "listeners": [lst.model_dump()]})
    assert cfg.anonymous_allowed(cfg.listeners[0]) is allowed


def test_the_shipped_deploy_config_refuses_anonymous_clients():
    cfg = load_config(Path(__file__).resolve().parent.parent / "deploy" / "mqbridge.yaml")
    assert cfg.broker.listeners
    for lst in cfg.broker.listeners:
        assert not lst.loopback_only and not cfg.broker.anonymous_allowed(lst)
    # and would without its password file too: the listener is not local
    bare = cfg.broker.model_copy(update={"password_file": None})
    assert not any(bare.anonymous_allowed(lst) for lst in bare.listeners)


def test_a_tls_ca_means_client_certificates_are_required():
    tls = {"cert": "s.pem", "key": "s.key"}
    assert ListenerConfig.model_validate({"tls": {**tls, "ca": "ca.pem"}}).tls.require_client_cert is True
    assert ListenerConfig.model_validate({"tls": tls}).tls.require_client_cert is False
    with pytest.raises(ValueError, match="require_client_cert: false would not even request"):
        ListenerConfig.model_validate({"tls": {**tls, "ca": "ca.pem", "require_client_cert": False}})
    with pytest.raises(ValueError, match="require_client_cert needs ca"):
        ListenerConfig.model_validate({"tls": {**tls, "require_client_cert": True}})


def test_two_listeners_of_one_name_are_refused():
    with pytest.raises(ValueError, match="two listeners named 'a'"):
        BrokerConfig.model_validate({"listeners": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]})


# -- the check, the throttle and the log -------------------------------------------------------------------


def authenticator(clock: FakeClock, **broker: object) -> Authenticator:
    cfg = BrokerConfig.model_validate({"listeners": [{"host": "127.0.0.1", "port": 0, "name": "local"}],
                                       "users": {"alice": pw.make_hash(b"right").encode()}, **broker})
    return Authenticator(cfg, clock)


def test_check_codes_and_the_lockout_refuses_even_the_right_password():
    clock = FakeClock()
    auth = authenticator(clock)
    assert auth.check("local", "10.0.0.1:5000", "c", "alice", b"right") is None
    assert auth.check("local", "10.0.0.1:5000", "c", None, None) == ConnackCode.NOT_AUTHORIZED
    assert auth.check("local", "10.0.0.1:5000", "c", "mallory", b"right") == ConnackCode.BAD_USERNAME_OR_PASSWORD
    assert auth.check("local", "10.0.0.1:5000", "c", "alice", None) == ConnackCode.BAD_USERNAME_OR_PASSWORD
    for _ in range(3):
        assert auth.check("local", "10.0.0.2:1", "c", "alice", b"guess") == ConnackCode.BAD_USERNAME_OR_PASSWORD
    # 10.0.0.2 had 3 failures; two more are allowed, the sixth locks it
    for _ in range(3):
        auth.check("local", "10.0.0.2:1", "c", "alice", b"guess")
    assert auth.check("local", "10.0.0.2:2", "c", "alice", b"right") == ConnackCode.NOT_AUTHORIZED
    assert auth.check("local", "10.0.0.3:1", "c", "alice", b"right") is None     # another address is not
    clock.now += 1.01
    assert auth.check("local", "10.0.0.2:3", "c", "alice", b"right") is None


def test_throttle_doubles_up_to_the_maximum_and_forgets():
    clock = FakeClock()
    throttle = LoginThrottle(failures=2, lockout_max=5.0, clock=clock)
    for _ in range(2):
        throttle.failed("a", "u")
    assert throttle.locked("a", "u") == ""
    lengths = []
    for _ in range(5):
        throttle.failed("a", "u")
        start = clock.now
        while throttle.locked("a", "u"):
            clock.now += 0.25
        lengths.append(clock.now - start)
    assert lengths == [1.0, 2.0, 4.0, 5.0, 5.0]
    clock.now += 10 * 5.0 + 1        # 10 x the maximum without a failure: forgotten
    throttle.failed("a", "u")
    assert throttle.locked("a", "u") == ""


def test_a_user_locked_out_by_guesses_elsewhere_still_logs_in_from_where_it_did_before():
    clock = FakeClock()
    throttle = LoginThrottle(failures=3, lockout_max=60.0, clock=clock)
    throttle.succeeded("192.0.2.7", "bob")
    for i in range(7):                   # 7 addresses, one guess each: no address is locked, "bob" is
        throttle.failed(f"198.51.100.{i}", "bob")
    assert throttle.locked("198.51.100.99", "bob").startswith("user 'bob' locked")
    assert throttle.locked("198.51.100.99", "carol") == ""
    assert throttle.locked("192.0.2.7", "bob") == ""
    for _ in range(4):                   # but an address's own failures lock it, known or not
        throttle.failed("192.0.2.7", "bob")
    assert throttle.locked("192.0.2.7", "bob").startswith("address 192.0.2.7 locked")


def test_address_keys_group_an_ipv6_host_by_its_64():
    assert address_key("10.1.2.3:5555") == "10.1.2.3"
    assert address_key("2001:db8:1:2:aaaa::1:5555") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:2:bbbb::9:1") == "2001:db8:1:2::/64"
    assert address_key("::ffff:10.1.2.3:80") == "10.1.2.3"
    assert address_key("::1:1883") == "::/64"


def test_the_log_is_rate_limited_and_counts_what_it_left_out(caplog):
    clock = FakeClock()
    limited = RateLimitedLog(clock, burst=3, window=10.0)
    with caplog.at_level(logging.WARNING, logger="mqbridge.auth"):
        for i in range(50):
            limited.warning("failed login %d", i)
        assert [r.getMessage() for r in caplog.records] == ["failed login 0", "failed login 1", "failed login 2"]
        clock.now += 10.0
        limited.warning("failed login %d", 50)
    assert caplog.records[3].getMessage() == "47 more failed or throttled logins were not logged in the last 10 s"
    assert caplog.records[4].getMessage() == "failed login 50"


def test_a_verified_password_is_remembered_only_for_the_hash_it_matched():
    clock = FakeClock()
    auth = authenticator(clock)
    assert auth.check("local", "10.0.0.1:1", "c", "alice", b"right") is None
    assert "alice" in auth._verified
    changed = auth.install({"alice": pw.make_hash(b"new")})
    assert changed == ["users: password changed alice"]
    assert auth.check("local", "10.0.0.1:1", "c", "alice", b"right") == ConnackCode.BAD_USERNAME_OR_PASSWORD
    assert auth.check("local", "10.0.0.1:1", "c", "alice", b"new") is None


def test_no_users_and_anonymous_refused_refuses_everyone():
    clock = FakeClock()
    auth = Authenticator(BrokerConfig.model_validate({"allow_anonymous": False, "listeners": [{"name": "l"}]}),
                         clock)
    assert auth.check("l", "10.0.0.1:1", "c", None, None) == ConnackCode.NOT_AUTHORIZED
    assert auth.check("l", "10.0.0.1:1", "c", "anyone", b"anything") == ConnackCode.NOT_AUTHORIZED


def test_a_listener_label_no_listener_has_refuses_anonymous():
    auth = Authenticator(BrokerConfig.model_validate({"listeners": [{"host": "127.0.0.1", "port": 0}]}),
                         FakeClock())
    assert auth.anonymous_allowed("mqtt:127.0.0.1:40001")         # config port 0, bound 40001
    assert not auth.anonymous_allowed("mqtt:10.0.0.1:40001")


# -- mqbridge passwd ---------------------------------------------------------------------------------------


def run_passwd(*argv: str) -> int:
    return cli_main(["passwd", *argv])


def test_passwd_creates_updates_and_deletes_keeping_other_lines(tmp_path, capsys):
    path = tmp_path / "passwd"
    assert run_passwd("-c", "-b", str(path), "alice", "one") == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text("# plant users\n" + path.read_text() + "\n")
    assert run_passwd("-b", str(path), "bob", "two") == 0
    alice_line = path.read_text().splitlines()[1]
    assert run_passwd("-b", str(path), "alice", "three") == 0
    lines = path.read_text().splitlines()
    assert lines[0] == "# plant users" and lines[2] == "" and lines[1] != alice_line
    users = pw.read_password_file(path)
    assert users["alice"].verify(b"three") and not users["alice"].verify(b"one") and users["bob"].verify(b"two")
    assert run_passwd("-D", str(path), "alice") == 0
    assert sorted(pw.read_password_file(path)) == ["bob"]
    assert run_passwd("-D", str(path), "alice") == 1
    assert "user 'alice' not found" in capsys.readouterr().err


def test_passwd_prompts_twice_and_refuses_a_mismatch(tmp_path, monkeypatch, capsys):
    path = tmp_path / "passwd"
    answers = iter(["first", "first", "again", "agian"])
    monkeypatch.setattr(passwd_cli.getpass, "getpass", lambda prompt: next(answers))
    assert run_passwd("-c", str(path), "alice") == 0
    assert pw.read_password_file(path)["alice"].verify(b"first")
    assert run_passwd(str(path), "alice") == 1
    assert "do not match" in capsys.readouterr().err
    assert pw.read_password_file(path)["alice"].verify(b"first")


def test_passwd_refuses_bad_input_and_prints_a_line_for_dash(tmp_path, capsys):
    assert run_passwd("-b", str(tmp_path / "none"), "alice", "x") == 1
    assert "no such file (-c creates one)" in capsys.readouterr().err
    assert run_passwd("-c", "-b", str(tmp_path / "f"), "a:b", "x") == 1
    assert "must not contain ':'" in capsys.readouterr().err
    assert run_passwd("-c", str(tmp_path / "f"), "alice", "x") == 1
    assert "needs -b" in capsys.readouterr().err
    assert run_passwd("-b", "-", "alice", "pass") == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("alice:$7$101$") and pw.parse_password_file(line, "-")["alice"].verify(b"pass")
    assert run_passwd("-I", "5000", "-b", "-", "alice", "pass") == 0
    assert capsys.readouterr().out.startswith("alice:$7$5000$")


def test_passwd_upgrade_hashes_plain_text_and_leaves_hashes_alone(tmp_path, capsys):
    path = tmp_path / "passwd"
    kept = f"carol:{pw.make_hash(b'c').encode()}"
    path.write_text(f"alice:wonder land\n{kept}\nbob:builder\n")
    assert run_passwd("-U", str(path)) == 0
    assert "2 plain-text passwords hashed" in capsys.readouterr().out
    users = pw.read_password_file(path)
    assert users["alice"].verify(b"wonder land") and users["bob"].verify(b"builder")
    assert path.read_text().splitlines()[1] == kept
    path.write_text("dave:sha256:" + hashlib.sha256(b"d").hexdigest() + "\n")
    assert run_passwd("-U", str(path)) == 1
    assert "cannot be converted" in capsys.readouterr().err


def test_passwd_arguments_parse_like_mosquitto_passwd():
    parser = argparse.ArgumentParser()
    passwd_cli.register(parser.add_subparsers())
    args = parser.parse_args(["passwd", "-c", "-b", "FILE", "USER", "PASS"])
    assert (args.create, args.batch, args.file, args.user, args.password) == (True, True, "FILE", "USER", "PASS")
    with pytest.raises(SystemExit):
        parser.parse_args(["passwd", "-c", "-D", "FILE", "USER"])
