"""Gateway configuration: a YAML file validated with pydantic; errors name the file, line and field."""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bridge.mqtt.packets import MAX_CONNECT_LENGTH
from bridge.mqtt.passwords import HashError, check_user_name, parse_hash
from mappings.rules.yaml_lines import line_of


class ConfigError(Exception):
    pass


def _salted_hash(stored: str) -> str:
    try:
        parse_hash(stored)
    except HashError as exc:
        raise ValueError(f"{exc} (`mqbridge passwd -b - USER PASSWORD` prints a line USER:HASH whose HASH "
                         "can stand here)") from None
    return stored


StoredPassword = Annotated[str, AfterValidator(_salted_hash)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TlsConfig(_Model):
    cert: Path
    key: Path
    ca: Path | None = None                 # client certificates are requested and verified against it
    require_client_cert: bool = False      # default: true when ca is set
    # the client certificate's subject CN is the user name (mosquitto's option of that name): the CONNECT's
    # user name and password are not used on this listener, a certificate without one CN is refused
    use_identity_as_username: bool = False

    @model_validator(mode="before")
    @classmethod
    def _client_certificates(cls, data: object) -> object:
        """A ``ca`` is only there to verify client certificates: with one, they are required (as with
        mosquitto's cafile + require_certificate); without one, none can be verified."""
        if not isinstance(data, dict):
            return data
        has_ca = data.get("ca") is not None
        require = data.get("require_client_cert")
        if data.get("use_identity_as_username") is True and not has_ca:
            raise ValueError("use_identity_as_username needs ca: only a client certificate verified against it "
                             "can name a user")
        if require is None:
            return {**data, "require_client_cert": has_ca}
        if has_ca and require is False:
            raise ValueError("ca verifies client certificates, which require_client_cert: false would not even "
                             "request: remove ca, or require_client_cert")
        if require is True and not has_ca:
            raise ValueError("require_client_cert needs ca: the CA bundle client certificates are verified "
                             "against")
        return data


class ListenerConfig(_Model):
    name: str = ""
    host: str = "127.0.0.1"
    port: int = Field(1883, ge=0, le=65535)   # 0: pick a free port (tests)
    tls: TlsConfig | None = None
    max_connections: int = Field(1000, ge=0)  # open connections on this listener; 0: unlimited
    allow: list[str] = Field(default_factory=list)   # CIDRs or addresses; empty: everyone
    deny: list[str] = Field(default_factory=list)
    start: bool = True                         # started at boot (listener control can change it)
    allow_anonymous: bool | None = None        # None: the broker's setting (BrokerConfig.anonymous_allowed)
    # what holds a plain TCP connection: "compact" (rawtcp.py, ~1.6 KiB an idle connection), "loop" (the event
    # loop's own transports: uvloop's cost ~2.7 KiB), "auto" (compact where the platform has epoll, on either
    # loop; the loop's elsewhere); docs/broker.md "Memory per connection"
    transport: Literal["auto", "compact", "loop"] = "auto"

    @model_validator(mode="after")
    def _transport_of_tls(self) -> ListenerConfig:
        if self.tls is not None and self.transport == "compact":
            raise ValueError("transport: compact is for plain TCP; a TLS listener uses the event loop's transports "
                             "(remove transport, or set it to auto or loop)")
        return self

    @field_validator("allow", "deny")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for item in value:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError as exc:
                raise ValueError(f"{item!r} is not an address or CIDR network") from exc
        return value

    def label(self, bound_port: int = 0) -> str:
        """The name logs and status show; ``bound_port`` is the port actually bound (config port 0)."""
        return self.name or f"{'mqtts' if self.tls else 'mqtt'}:{self.host}:{bound_port or self.port}"

    @property
    def loopback_only(self) -> bool:
        """Bound to a loopback address only: reachable from this machine alone."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False   # a host name or "" (every interface)


class LimitsConfig(_Model):
    """Per-client limits; docs/broker.md "Resource limits" gives each one's memory cost."""

    max_message_size: int = Field(10 * 1024 * 1024, ge=64)     # bytes of remaining length
    # remaining length of the first packet, the CONNECT (and nothing else is taken before it); the
    # default is the largest CONNECT the protocol allows (a 65,535-byte will message included)
    max_connect_size: int = Field(MAX_CONNECT_LENGTH, ge=12, le=MAX_CONNECT_LENGTH)
    max_inflight: int = Field(128, ge=1, le=65535)              # QoS 1/2 in flight per client
    # QoS 1/2 queued per client session: beyond, dropped (mosquitto's max_queued_messages default); route
    # sessions have their own (options.max_queued, ROUTE_MAX_QUEUED) and push back instead
    max_queued: int = Field(1000, ge=0)
    # the same in bytes (payload + topic of the queued deliveries), whichever is reached first; it also
    # bounds one client's unreleased QoS 2 publications
    max_queued_bytes: int = Field(16 * 1024 * 1024, ge=1024)
    # QoS 2 publications a client sent and has not released (PUBREL): beyond, the connection is closed
    max_inbound_qos2: int = Field(1024, ge=1, le=65535)
    connect_timeout: float = Field(10.0, gt=0)                  # seconds from TCP accept to CONNECT
    # failed logins from one address (twice as many for one user name) before each further failure locks
    # that address (user name) out, for 1 s doubling up to login_lockout_max (bridge/mqtt/auth.py)
    login_failures: int = Field(5, ge=1)
    login_lockout_max: float = Field(60.0, gt=0)
    session_expiry_hours: float = Field(168.0, gt=0)            # idle persistent sessions expire
    # the longest keep alive a client may use, as mosquitto's max_keepalive: an MQTT 5 client asking for
    # more, or for none (0), is told this one (Server Keep Alive); a 3.1/3.1.1 client asking for more is
    # refused (identifier rejected). 0: no limit, keep alive 0 allowed at every level
    max_keepalive: int = Field(65535, ge=0, le=65535)
    # MQTT 5: Topic Aliases a client may set per connection (each holds one topic name); 0: none
    topic_alias_maximum: int = Field(10, ge=0, le=65535)
    # MQTT 5: Topic Aliases the broker uses towards a client, at most the client's Topic Alias Maximum; 0
    # (default): none, because mosquitto_sub 2.0.11 announces a maximum and then fails on an aliased PUBLISH
    topic_aliases_out: int = Field(0, ge=0, le=65535)
    qos0_buffer_bytes: int = Field(8 * 1024 * 1024, ge=1024)    # drop QoS 0 to a client this far behind


class DurabilityConfig(_Model):
    # FULL: fsync each group commit (survives power loss). NORMAL: WAL without fsync on commit
    # (survives a process crash, may lose the last commits on power loss).
    synchronous: Literal["FULL", "NORMAL", "EXTRA"] = "FULL"


class AdminConfig(_Model):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(9883, ge=0, le=65535)   # 0: pick a free port


class LoggingConfig(_Model):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    json_format: bool = Field(False, alias="json")
    trace_clients: list[str] = Field(default_factory=list)   # packet-level trace for these client ids

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class BrokerConfig(_Model):
    listeners: list[ListenerConfig] = Field(default_factory=lambda: [ListenerConfig()])
    limits: LimitsConfig = LimitsConfig()
    durability: DurabilityConfig = DurabilityConfig()
    # authenticated user names allowed to publish $SYS/SCADA/MQIsdpListener/<port>|all ON/OFF
    listener_control_users: list[str] = Field(default_factory=list)
    sys_interval: float = Field(10.0, ge=0)    # seconds between $SYS/broker updates; 0 disables
    # None: anonymous clients only on loopback listeners and only while no users are configured (as
    # mosquitto 2 allows them only in its local-only mode); a listener's own setting wins
    allow_anonymous: bool | None = None
    users: dict[str, StoredPassword] = Field(default_factory=dict)   # user name -> "$7$..." (mqbridge passwd)
    password_file: Path | None = None      # mosquitto_passwd's format; re-read by `mqbridge reload`
    acl_file: Path | None = None           # mosquitto's acl_file format (docs/broker.md); re-read by reload
    # a regular expression every client id must match in full; %u: the (checked) user name, e.g. "%u(-.+)?"
    client_id_pattern: str | None = None

    @field_validator("client_id_pattern")
    @classmethod
    def _client_id_pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value.replace("%u", "u"))
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @field_validator("users")
    @classmethod
    def _user_names(cls, value: dict[str, str]) -> dict[str, str]:
        for user in value:
            problem = check_user_name(user)
            if problem:
                raise ValueError(f"user {user!r}: {problem}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "listener_control_clients" in data:
            raise ValueError("listener_control_clients was replaced by listener_control_users: listener control "
                             "needs an authenticated user name, since a client chooses its own client id")
        return data

    @model_validator(mode="after")
    def _unique_ports(self) -> BrokerConfig:
        seen: set[tuple[str, int]] = set()
        names: set[str] = set()
        for listener in self.listeners:
            key = (listener.host, listener.port)
            if listener.port and key in seen:
                raise ValueError(f"two listeners on {listener.host}:{listener.port}")
            seen.add(key)
            if listener.name and listener.name in names:
                raise ValueError(f"two listeners named {listener.name!r}")
            names.add(listener.name)
        return self

    def anonymous_allowed(self, listener: ListenerConfig) -> bool:
        """Whether clients without a user name may connect on ``listener``."""
        if listener.allow_anonymous is not None:
            return listener.allow_anonymous
        if self.allow_anonymous is not None:
            return self.allow_anonymous
        return not (self.users or self.password_file) and listener.loopback_only


class ConvlogConfig(_Model):
    enabled: bool = True
    directory: Path | None = None                  # default: <data_dir>/convlog
    max_file_mb: int = Field(64, ge=1)
    # a Parquet copy of each closed file for the audit (needs pyarrow; docs/conversion-log.md): CPU and
    # memory at each rotation that a gateway whose logs are never audited need not spend
    parquet_sidecars: bool = True


class QueueDefinition(_Model):
    """What a queue manager takes from a queue's definition when a message is put "as queue default"
    (IBM MQ docs "MQMD - Message descriptor", Priority and Persistence): DEFPRTY and DEFPSIST."""
    default_priority: int = Field(0, ge=0, le=9)
    default_persistence: bool = False


class EmbeddedConfig(_Model):
    """The embedded queue store's queue definitions: ``queue_defaults`` for every queue, ``queues`` per name."""
    queue_defaults: QueueDefinition = QueueDefinition()
    queues: dict[str, QueueDefinition] = Field(default_factory=dict)

    def definition(self, queue: str) -> tuple[int, bool]:
        """(default priority, default persistence) of ``queue``."""
        d = self.queues.get(queue, self.queue_defaults)
        return d.default_priority, d.default_persistence


class GatewayConfig(_Model):
    data_dir: Path = Path("var")
    gateway_id: str = "mqbridge"
    rules: Path | None = None                      # mapping rules file; default: the embedded routes
    convlog: ConvlogConfig = ConvlogConfig()
    broker: BrokerConfig = BrokerConfig()
    admin: AdminConfig = AdminConfig()
    logging: LoggingConfig = LoggingConfig()
    embedded: EmbeddedConfig = EmbeddedConfig()


def load_config(path: Path | str | None) -> GatewayConfig:
    if path is None:
        return GatewayConfig()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = line_of(text, loc)
            field = ".".join(str(p) for p in loc)
            lines.append(f"{path}:{line if line else '?'}: {field}: {err['msg']}")
        raise ConfigError("\n".join(lines)) from None
