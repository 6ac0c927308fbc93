"""The mapping-rules file users write: connectors and routes, validated with pydantic; every error
names the file, line and field. Pure: the caller reads the file and passes its text."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from mappings.conversions.envelope import ALLOW_KINDS
from mappings.errors import MappingError
from mappings.mqtt.topics import TopicError, filters_overlap, topic_matches, validate_topic_filter
from mappings.rules.yaml_lines import line_of
from mappings.selector.compile import compile_selector

EMBEDDED = "embedded"   # the connector that always exists: the local durable queue store
MQ_NAME = re.compile(r"^[A-Za-z0-9._/%]{1,48}$")   # MQ object names: 48 characters of this set
TEMPLATE_FIELD = re.compile(r"\{([^{}]*)\}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- connectors -------------------------------------------------------------------------------------


class EmbeddedConnector(_Model):
    type: Literal["embedded"]


class JndiSettings(_Model):
    """Where a native JMS connector finds its connection factory and destinations: a JNDI InitialContext."""

    initial_context_factory: str               # java.naming.factory.initial
    provider_url: str | None = None            # java.naming.provider.url
    environment: dict[str, str] = Field(default_factory=dict)   # further InitialContext environment entries
    connection_factory: str = "ConnectionFactory"   # the connection factory's JNDI name
    destinations: bool = True                  # a route's queue/topic is a JNDI name (else the provider's name)


class JmsConnector(_Model):
    """A JMS provider reached over STOMP 1.2 (ActiveMQ first), or through its own JMS client in the gateway's
    JVM (``client: native``: its ``jars``, and its ``connection_factory`` class with ``factory_properties`` or
    ``jndi``)."""

    type: Literal["jms"]
    client: Literal["stomp", "native"] = "stomp"
    jars: tuple[str, ...] = ()                 # native: paths or globs of the provider's client jars
    # native: options of the gateway's JVM (system properties such as -Djavax.net.ssl.trustStore=..., -Xmx256m);
    # one JVM per process: every native connector gives the same ones
    jvm_options: tuple[str, ...] = ()
    connection_factory: str | None = None      # native: its javax.jms.ConnectionFactory class
    # native: bean properties by their setters, e.g. brokerURL (a string), useAsyncSend (a boolean), port (an int)
    factory_properties: dict[str, str | bool | int | float] = Field(default_factory=dict)
    jndi: JndiSettings | None = None           # native: the factory (and destinations) looked up by JNDI
    client_id: str | None = None               # native: the JMS client id of its durable subscriptions
    host: str = "127.0.0.1"
    port: int = Field(61613, ge=1, le=65535)
    user: str | None = None
    password: str | None = None
    vhost: str | None = None
    heartbeat_ms: int = Field(10_000, ge=0)
    heartbeat_grace: float = Field(2.5, ge=1.5)   # silence tolerated, in negotiated heart-beat intervals
    # a MapMessage's byte[] values: their base64 String, or XStream <byte-array> where the broker allows it
    map_byte_arrays: Literal["base64", "native"] = "base64"
    reconnect_max_seconds: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _native(self) -> JmsConnector:
        if self.client != "native":
            if self.jndi is not None or self.client_id is not None or self.jvm_options:
                raise ValueError("jndi, client_id and jvm_options belong to client native (STOMP names its client "
                                 "id per route)")
            return self
        bad = [o for o in self.jvm_options if not o.startswith("-")]
        if bad:
            raise ValueError(f"jvm_options: {', '.join(map(repr, bad))} is not a JVM option (they start with '-', "
                             "e.g. -Djavax.net.ssl.trustStore=/etc/mqbridge/trust.jks)")
        if not self.jars or (self.connection_factory is None) == (self.jndi is None):
            raise ValueError("client native needs jars (the provider's client jars) and one of connection_factory "
                             "(its javax.jms.ConnectionFactory class) or jndi (where to look it up)")
        if self.jndi is not None and self.factory_properties:
            raise ValueError("factory_properties: the factory found by jndi is configured in its directory")
        return self


class MqConnector(_Model):
    """An IBM MQ queue manager through pymqi (client connection)."""

    type: Literal["mq"]
    queue_manager: str
    channel: str = "DEV.APP.SVRCONN"
    conname: str = "127.0.0.1(1414)"
    user: str | None = None
    password: str | None = None
    cipher: str | None = None          # TLS CipherSpec, e.g. ANY_TLS12_OR_HIGHER
    key_repository: str | None = None


Connector = Annotated[EmbeddedConnector | JmsConnector | MqConnector, Field(discriminator="type")]


# -- endpoints ----------------------------------------------------------------------------------------


class MqttEndpoint(_Model):
    """The built-in broker. As a source: a topic filter. As a target: a topic template or one client."""

    mqtt: str
    client_id: str | None = None       # target only: send to this client without a subscription

    @property
    def protocol(self) -> str:
        return "mqtt"


class QueueEndpoint(_Model):
    """A queue or topic of a connector (embedded, jms or mq)."""

    connector: str = EMBEDDED
    queue: str | None = None
    topic: str | None = None           # JMS topic name, or MQ topic string
    subscription: str | None = None    # MQ/JMS durable subscription name (source on a topic)
    # target only, of a route from MQTT: send each message to the destination its envelope names
    # (headers.JMSDestination; options.mqtt_format envelope) or, in the payload form, its topic names (a
    # queue:// / topic:// URI: the MQTT 5 Response Topic of a JMS request), if it starts with one of ``allow``;
    # queue/topic is then the fallback
    reply_to: bool = False
    allow: tuple[str, ...] = ()        # "queue://<name prefix>" | "topic://..." | "temp-queue://..." (JMS)

    @model_validator(mode="after")
    def _one_destination(self) -> QueueEndpoint:
        if self.reply_to:
            if self.queue is not None and self.topic is not None:
                raise ValueError("give at most one of queue or topic (the fallback of reply_to)")
        elif (self.queue is None) == (self.topic is None):
            raise ValueError("give exactly one of queue or topic")
        elif self.allow:
            raise ValueError("allow: only a reply_to target has an allow list")
        for prefix in self.allow:
            if not prefix.startswith(ALLOW_KINDS):
                raise ValueError(f"allow: {prefix!r} must start with queue://, topic://, temp-queue:// "
                                 "or temp-topic://")
        return self

    @property
    def destination(self) -> str:
        """The fixed destination; "" for a reply_to target without a fallback."""
        if self.queue is not None:
            return self.queue
        return f"topic:{self.topic}" if self.topic is not None else ""


def _endpoint_kind(value: Any) -> str:  # noqa: ANN401 - raw YAML or a model
    if isinstance(value, dict):
        return "mqtt-endpoint" if "mqtt" in value else "queue-endpoint"
    return "mqtt-endpoint" if isinstance(value, MqttEndpoint) else "queue-endpoint"


Endpoint = Annotated[
    Annotated[MqttEndpoint, Tag("mqtt-endpoint")] | Annotated[QueueEndpoint, Tag("queue-endpoint")],
    Discriminator(_endpoint_kind)]


class RouteOptions(_Model):
    convert_message_type: Literal["auto", "text", "bytes"] = "auto"   # Amlen ConvertMessageType
    json_style: Literal["plain", "typed"] = "plain"                    # Map/Stream -> MQTT JSON
    # MQ Telemetry Table 1; authenticated_user: the user name the broker checked, else the client id
    user_identifier: Literal["authenticated_user", "client_id", "user_name", "configured"] = "authenticated_user"
    configured_user_id: str = ""
    persistence: Literal["as_source", "persistent", "not_persistent"] = "as_source"
    priority: int | None = Field(None, ge=0, le=9)
    property_map: dict[str, str] = Field(default_factory=dict)        # source name -> target name
    selector: str | None = None                                       # JMS selector on the source
    backout_threshold: int = Field(3, ge=1)
    pipeline: int = Field(4, ge=1, le=64)   # batches in flight at the target, confirmed in order
    backout_destination: QueueEndpoint | None = None
    # an MQ message backed out gets an MQDLH (a dead-letter queue) rather than a mqbridge RFH2 folder;
    # None: when the destination is SYSTEM.DEAD.LETTER.QUEUE (docs/connectors.md)
    backout_dead_letter: bool | None = None
    admin_topics: dict[str, str] = Field(default_factory=dict)        # topic object -> topic string
    default_qos: int = Field(2, ge=0, le=2)                           # MQ Telemetry Table 4: DEFAULT.QoS
    swiftmq_properties: bool = True                                   # JMSXUserID, client id, QoS
    mqtt_format: Literal["payload", "envelope"] = "payload"   # envelope: JMS message JSON (docs/json-forms.md)
    # from an MQTT topic filter: QoS 1/2 publications the route's broker session queues while its target is
    # stuck before it holds their publishers (backpressure); default 100,000
    max_queued: int | None = Field(None, ge=1)
    # from an MQTT topic filter to the embedded queue store: QoS 1/2 publications are converted as they arrive
    # and acknowledged after the queue's commit, with no copy in the broker's store; to MQTT: a QoS 1 delivery to
    # a connected persistent session is held by the source until its PUBACK, not journaled (docs/broker.md)
    direct: bool = True
    # MQ -> JMS: a usr property value its dt= cannot hold backs the whole message out, or is dropped (a finding)
    bad_property: Literal["backout", "drop"] = "backout"
    # MQTT -> MQ: the MQMD ReplyToQ of a request whose MQTT 5 Response Topic is a topic (docs/mqtt5-mq.md)
    reply_to_queue: str | None = Field(None, pattern=r"^[A-Za-z0-9._/%]{1,48}$")
    # the user whose rules in the broker's ACL file (``user`` lines, %u) the route's subscription (from an
    # MQTT filter) and publications (to MQTT) are checked against; None: the anonymous rules
    acl_user: str | None = Field(None, min_length=1, max_length=65535, pattern=r"^[^\x00-\x1f\x7f]+$")

    @field_validator("selector")
    @classmethod
    def _selector_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_selector(value)
            except MappingError as exc:
                raise ValueError(f"selector does not parse: {exc}") from None
        return value


class Route(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    source: Endpoint = Field(alias="from")
    target: Endpoint = Field(alias="to")
    options: RouteOptions = RouteOptions()
    enabled: bool = True

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _check(self) -> Route:
        src, dst = self.source, self.target
        if isinstance(src, MqttEndpoint):
            if src.client_id is not None:
                raise ValueError("from.client_id: a client id is only meaningful on an MQTT target")
            try:
                validate_topic_filter(src.mqtt)
            except TopicError as exc:
                raise ValueError(f"from.mqtt: {exc}") from None
        if self.options.reply_to_queue is not None and not (isinstance(src, MqttEndpoint)
                                                            and isinstance(dst, QueueEndpoint)):
            raise ValueError("options.reply_to_queue: only a route from MQTT to an MQ queue writes MQMD ReplyToQ")
        if self.options.acl_user is not None and not (isinstance(src, MqttEndpoint) or isinstance(dst, MqttEndpoint)):
            raise ValueError("options.acl_user: the broker's ACL applies only to a route from or to MQTT")
        if self.options.max_queued is not None and not isinstance(src, MqttEndpoint):
            raise ValueError("options.max_queued: only a route from an MQTT topic filter has a broker session "
                             "queue to limit")
        if isinstance(dst, MqttEndpoint):
            check_topic_template(dst.mqtt)
            if self.options.priority is not None:
                raise ValueError("options.priority: MQTT has no message priority (the option sets MQMD Priority "
                                 "or JMSPriority on MQ and JMS targets)")
        if isinstance(src, QueueEndpoint) and src.topic is not None and TEMPLATE_FIELD.search(src.topic):
            raise ValueError(f"from.topic: {src.topic!r}: a source topic is not a template")
        if isinstance(dst, QueueEndpoint) and dst.topic is not None and TEMPLATE_FIELD.search(dst.topic):
            if not isinstance(src, MqttEndpoint):
                raise ValueError(f"to.topic: {dst.topic!r}: a topic template is filled from the MQTT topic, "
                                 "so from must be an mqtt topic filter")
            for name in TEMPLATE_FIELD.findall(dst.topic):
                if not (name.isdigit() and int(name) >= 1) and name not in ("topic", "client"):
                    raise ValueError(f"to.topic: unknown template field {{{name}}} in {dst.topic!r} "
                                     "(known: {1}.., {topic}, {client})")
        if isinstance(src, MqttEndpoint) and isinstance(dst, MqttEndpoint):
            raise ValueError("an MQTT -> MQTT route is the broker's own job: use a subscription")
        for where, ep in (("from", src), ("to", dst)):
            if isinstance(ep, QueueEndpoint) and ep.queue is not None and not MQ_NAME.match(ep.queue):
                raise ValueError(f"{where}.queue: {ep.queue!r} is not a valid queue name "
                                 "(1..48 of A-Z a-z 0-9 . _ / %)")
        return self



def check_topic_template(template: str) -> None:
    """Target topic templates: literal text with ``{1}``.. (source topic levels, 1-based),
    ``{topic}`` (whole source topic or destination), ``{dest}`` (source destination name with
    ``.`` -> ``/``, ``dotted_to_mqtt``), ``{client}`` (publishing client id)."""
    for name in TEMPLATE_FIELD.findall(template):
        if not (name.isdigit() and int(name) >= 1) and name not in ("topic", "dest", "client"):
            raise ValueError(f"to.mqtt: unknown template field {{{name}}} in {template!r}")
    literal = TEMPLATE_FIELD.sub("x", template)
    if "+" in literal or "#" in literal or not literal:
        raise ValueError(f"to.mqtt: {template!r} must be a topic name (no wildcards)")
    if template.startswith("$"):
        raise ValueError(f"to.mqtt: {template!r}: topics starting with '$' are the broker's own")


def render_topic(template: str, *, topic: str = "", dest: str = "", client: str = "") -> str:
    """Fill a target topic template (see check_topic_template). Missing levels render empty."""
    levels = topic.split("/") if topic else []

    def field(m: re.Match[str]) -> str:
        name = m.group(1)
        if name == "topic":
            return topic or dotted_to_mqtt(dest)
        if name == "dest":
            return dotted_to_mqtt(dest)
        if name == "client":
            return client
        i = int(name) - 1
        return levels[i] if i < len(levels) else ""

    return TEMPLATE_FIELD.sub(field, template)


def mqtt_to_dotted(topic: str) -> str:
    """MQTT ``a/b/c`` -> ActiveMQ/JMS ``a.b.c`` (the topic naming of ActiveMQ's own MQTT bridge); a dot inside a
    level is written ``%2E``, and a ``%`` ``%25``, so that ``dotted_to_mqtt`` gives every topic back."""
    return topic.replace("%", "%25").replace(".", "%2E").replace("/", ".")


_DOTTED_ESCAPE = re.compile("%(2E|25)")


def dotted_to_mqtt(name: str) -> str:
    """ActiveMQ/JMS ``a.b.c`` -> MQTT ``a/b/c``: ``mqtt_to_dotted`` undone (``%2E`` a dot inside a level, ``%25`` a
    ``%``; decoded in one pass, so an escape never makes another)."""
    return _DOTTED_ESCAPE.sub(lambda m: "." if m[1] == "2E" else "%", name.replace(".", "/"))


def render_dotted_topic(template: str, *, topic: str = "", client: str = "") -> str:
    """A JMS topic template (``to.topic`` of a route from MQTT) filled in ActiveMQ's dotted naming: the
    template's own text keeps its dots and has ``/`` read as ``.`` (``plant.{topic}`` and
    ``plant/{topic}`` are the same); each filled-in value is converted by ``mqtt_to_dotted``, so MQTT
    ``a/b`` gives ``a.b`` and a dot inside an MQTT level stays one level (``%2E``)."""
    levels = topic.split("/") if topic else []

    def field(m: re.Match[str]) -> str:
        name = m.group(1)
        if name == "topic":
            return mqtt_to_dotted(topic)
        if name == "client":
            return mqtt_to_dotted(client)
        i = int(name) - 1
        return mqtt_to_dotted(levels[i]) if i < len(levels) else ""

    out: list[str] = []
    last = 0
    for m in TEMPLATE_FIELD.finditer(template):
        out.append(template[last:m.start()].replace("/", "."))
        out.append(field(m))
        last = m.end()
    out.append(template[last:].replace("/", "."))
    return "".join(out)


#: (source protocol, target protocol) a route converts between; "mq" is an IBM MQ or embedded queue
ROUTE_PAIRS = frozenset({("mqtt", "mq"), ("mq", "mqtt"), ("mqtt", "jms"), ("jms", "mqtt"), ("mq", "jms"),
                         ("jms", "mq")})


def endpoint_protocol(endpoint: MqttEndpoint | QueueEndpoint, connector_type: str) -> str:
    if isinstance(endpoint, MqttEndpoint):
        return "mqtt"
    return "jms" if connector_type == "jms" else "mq"


class RulesFile(_Model):
    version: Literal[1] = 1
    connectors: dict[str, Connector] = Field(default_factory=dict)
    routes: list[Route] = Field(default_factory=list)

    def connector(self, name: str) -> Connector:
        if name == EMBEDDED and name not in self.connectors:
            return EmbeddedConnector(type="embedded")
        return self.connectors[name]


def semantic_problems(rules: RulesFile) -> list[tuple[tuple[Any, ...], str]]:
    """Checks across the file: unique route names, defined connectors, no routing loops."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    names = set(rules.connectors) | {EMBEDDED}
    seen: set[str] = set()
    for i, route in enumerate(rules.routes):
        if route.name in seen:
            problems.append((("routes", i, "name"), f"two routes are named {route.name!r}"))
        seen.add(route.name)
        for loc, ep in ((("from",), route.source), (("to",), route.target),
                        (("options", "backout_destination"), route.options.backout_destination)):
            if isinstance(ep, QueueEndpoint) and ep.connector not in names:
                problems.append((("routes", i, *loc, "connector"),
                                 f"connector {ep.connector!r} is not defined "
                                 f"(known: {', '.join(sorted(names))})"))
        problems.extend((("routes", i, *loc), msg) for loc, msg in envelope_problems(route, rules))
        problems.extend((("routes", i), msg) for msg in pair_problems(route, rules, names))
        problems.extend((("routes", i, "from", *loc), msg) for loc, msg in durable_problems(route, rules, names))
    loop = find_loop(rules.routes, {name: c.type for name, c in rules.connectors.items()})
    if loop:
        first = next(i for i, r in enumerate(rules.routes) if r.name == loop[0])
        problems.append((("routes", first), f"routes loop a message back to its source: {' -> '.join(loop)}"))
    return problems


def durable_problems(route: Route, rules: RulesFile, known: set[str]) -> list[tuple[tuple[str, ...], str]]:
    """A durable subscription (``from.subscription``) of a native JMS connector: on a topic, under the
    connector's client id, and one route per connector (JMS 1.1 allows one connection per client id)."""
    src = route.source
    if not isinstance(src, QueueEndpoint) or src.subscription is None or src.connector not in known:
        return []
    conn = rules.connector(src.connector)
    if not isinstance(conn, JmsConnector) or conn.client != "native":
        return []
    if src.topic is None:
        return [(("subscription",), "a durable subscription is on a topic: give topic, not queue")]
    if conn.client_id is None:
        return [(("subscription",), f"a durable subscription needs connectors.{src.connector}.client_id")]
    others = [r.name for r in rules.routes if r.name != route.name and isinstance(r.source, QueueEndpoint)
              and r.source.connector == src.connector and r.source.subscription is not None]
    if others:
        return [(("subscription",), f"routes {route.name} and {others[0]} subscribe durably through connector "
                 f"{src.connector}, whose client id one connection holds at a time: give each its own connector")]
    return []


def pair_problems(route: Route, rules: RulesFile, known: set[str]) -> list[str]:
    """A route between two protocols the gateway converts between (the one verdict: validate, start and
    reload all refuse the rest)."""
    ends = []
    for ep in (route.source, route.target):
        if isinstance(ep, QueueEndpoint) and ep.connector not in known:
            return []   # reported as an undefined connector
        ends.append(endpoint_protocol(ep, "" if isinstance(ep, MqttEndpoint) else rules.connector(ep.connector).type))
    if tuple(ends) in ROUTE_PAIRS or ends == ["mqtt", "mqtt"]:   # MQTT -> MQTT: the route's own check
        return []
    return [f"no conversion from {ends[0]} to {ends[1]}: a route joins two different protocols (MQTT, MQ "
            f"queues, JMS); move messages within one provider with the provider's own tools"]


def envelope_problems(route: Route, rules: RulesFile) -> list[tuple[tuple[str, ...], str]]:
    """The envelope option and reply addressing (docs/json-forms.md, "Request/reply over MQTT 3.1.1")."""
    out: list[tuple[tuple[str, ...], str]] = []
    src, dst, opts = route.source, route.target, route.options
    envelope = opts.mqtt_format == "envelope"
    if envelope and not (isinstance(src, MqttEndpoint) or isinstance(dst, MqttEndpoint)):
        out.append((("options", "mqtt_format"), "envelope is a payload format of MQTT: the route has no MQTT end"))
    if isinstance(src, QueueEndpoint) and (src.reply_to or src.allow):
        out.append((("from", "reply_to"), "only a target takes its destination from the envelope"))
    bdest = opts.backout_destination
    if bdest is not None and (bdest.reply_to or bdest.allow):
        out.append((("options", "backout_destination", "reply_to"), "a backout destination is fixed"))
    if isinstance(dst, QueueEndpoint) and dst.reply_to:
        if not isinstance(src, MqttEndpoint):
            out.append((("to", "reply_to"), "the reply comes from MQTT: from must be an mqtt topic filter"))
        known = dst.connector in rules.connectors or dst.connector == EMBEDDED   # else reported above
        kind = rules.connector(dst.connector).type if known else None
        if isinstance(src, MqttEndpoint) and not envelope and known and kind != "jms":
            out.append((("to", "reply_to"), "in the payload form the reply's topic names a JMS destination "
                                            "(an MQTT 5 Response Topic): the target must be a jms connector, or "
                                            "use options.mqtt_format: envelope"))
        if not dst.allow:
            out.append((("to", "reply_to"), "give allow: the destinations MQTT clients may send to, by prefix "
                                            "(e.g. [\"queue://replies.\"])"))
        if kind == EMBEDDED and any(p.startswith("topic://") for p in dst.allow):
            out.append((("to", "allow"), "the embedded store has queues, not topics"))
        if known and kind != "jms" and any(p.startswith("temp-") for p in dst.allow):
            out.append((("to", "allow"), "temporary destinations are JMS destinations: the connector is "
                                         f"{kind}"))
    return out


def _reply_prefix_covers(prefixes: tuple[str, ...], ep: QueueEndpoint) -> bool:
    """Could a reply_to target with these allow prefixes write to the source ``ep``?"""
    name = f"queue://{ep.queue}" if ep.queue is not None else f"topic://{ep.topic}"
    literal = re.split(r"[*>#+]", name, maxsplit=1)[0]   # a wildcard source: its literal start
    return any(name.startswith(p) or (literal != name and p.startswith(literal)) for p in prefixes)


def _endpoint_key(ep: MqttEndpoint | QueueEndpoint) -> tuple[str, str]:
    if isinstance(ep, MqttEndpoint):
        return ("mqtt", ep.mqtt)
    return (ep.connector, ep.destination)


def _feeds(a: Route, b: Route, kinds: dict[str, str] | None = None) -> bool:
    """Does what route ``a`` writes arrive at route ``b``'s source?"""
    dst, src = a.target, b.source
    if isinstance(dst, MqttEndpoint) and isinstance(src, MqttEndpoint):
        if dst.client_id is not None:
            return False
        # {1}.. stand for one level; {topic}/{dest}/{client} may stand for several
        literal = TEMPLATE_FIELD.sub(lambda m: "+" if m.group(1).isdigit() else "#", dst.mqtt)
        return filters_overlap(literal, src.mqtt) or topic_matches(src.mqtt, literal)
    if isinstance(dst, QueueEndpoint) and isinstance(src, QueueEndpoint):
        if dst.reply_to and dst.connector == src.connector and _reply_prefix_covers(dst.allow, src):
            return True   # the envelope may name the source (allow prefix) ...
        if (dst.topic is not None and src.topic is not None and dst.connector == src.connector
                and kinds is not None):   # ... a topic the source's (wildcard) subscription matches ...
            dotted = kinds.get(dst.connector) == "jms"
            return filters_overlap(_topic_levels(dst.topic, dotted, template=True), _topic_levels(src.topic, dotted))
        return _endpoint_key(dst) == _endpoint_key(src)   # ... or the fallback is the source
    return False


def _topic_levels(topic: str, dotted: bool, *, template: bool = False) -> str:
    """A JMS (ActiveMQ: ``.`` levels, ``*`` one, ``>`` the rest) or MQ topic (``/``, ``+``, ``#``) as an
    MQTT-style filter; a target template's fields may stand for any levels (``#``)."""
    if template:   # {1}.. fill one level; {topic}/{client} may fill several
        topic = TEMPLATE_FIELD.sub(lambda m: "\x00" if m.group(1).isdigit() else "\x01", topic)
    levels = topic.split("." if dotted else "/")
    if dotted:
        levels = [{"*": "+", ">": "#"}.get(level, level) for level in levels]
    out: list[str] = []
    for level in levels:
        level = "#" if "\x01" in level else "+" if "\x00" in level else level
        out.append(level)
        if level == "#":
            break
    return "/".join(out)


def find_loop(routes: list[Route], kinds: dict[str, str] | None = None) -> list[str]:
    """A cycle of routes (by name) through which a message could return to its source, or []. ``kinds``
    (connector name -> type) lets topics of one connector be matched with its wildcards."""
    active = [r for r in routes if r.enabled]
    edges = {r.name: [s.name for s in active if _feeds(r, s, kinds)] for r in active}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for m in edges[n]:
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return []

    for r in active:
        if r.name not in state:
            found = visit(r.name)
            if found:
                return found
    return []


# -- loading with line numbers --------------------------------------------------------------------------


_UNION_TAGS = frozenset({"mqtt-endpoint", "queue-endpoint", "embedded", "jms", "mq"})


class RulesError(MappingError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems), structure=None)


def parse_rules(text: str, name: str = "<rules>") -> RulesFile:
    """Parse and validate a rules file's text. Raises RulesError listing `name:line: field: problem`."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark else name
        raise RulesError([f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}"]) from None
    if not isinstance(data, dict):
        raise RulesError([f"{name}:1: the top level must be a mapping with connectors and routes"])
    def render(loc: tuple[Any, ...], msg: str) -> str:
        line = line_of(text, loc)
        where = ".".join(str(p) for p in loc) or "(file)"
        return f"{name}:{line if line else '?'}: {where}: {msg}"

    try:
        rules = RulesFile.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (
                p in _UNION_TAGS or p.startswith("function-"))))
            problems.append(render(loc, err["msg"].removeprefix("Value error, ")))
        raise RulesError(problems) from None
    semantic = semantic_problems(rules)
    if semantic:
        raise RulesError([render(loc, msg) for loc, msg in semantic])
    return rules
