"""The native JMS connector: a JMS provider's own client library, run in the gateway's process through JPype
(docs/connectors.md). ``jvm`` starts the one JVM of the process; ``objects`` converts javax.jms messages to
and from the JMS model of mappings/jms; ``connector`` is the route's source and target."""

TEMPORARY = ("temporary", "true")   # the Destination option of a temporary queue or topic, carried by name
