// Test-only JMS client over OpenWire: sends messages described as JSON and prints received ones as JSON
// with exact Java types. No third-party JSON library: a tiny parser/emitter lives at the bottom.
//
// Usage:
//   java JmsTool send    --url tcp://127.0.0.1:PORT --dest queue://NAME      (JSON object or array on stdin)
//   java JmsTool receive --url tcp://127.0.0.1:PORT --dest queue://NAME --count N [--timeout-ms MS]
//                        [--selector SEL]
//   java JmsTool serve   --url tcp://127.0.0.1:PORT   (JSON commands on stdin, see serve())
// `send` prints one line {"sent": "<JMSMessageID>"} per message. `receive` prints "READY" on stderr once
// the consumer exists (so a caller can publish to a topic after it), then one JSON line per message; exit
// code 3 if fewer than N arrived before the timeout, 2 for usage/input errors.
//
// Message description (send):
//   {"type": "Text"|"Bytes"|"Map"|"Stream"|"Object"|"Message",
//    "destination": "queue://other"   (optional: overrides --dest for this message),
//    "body": <per type, see below>,
//    "properties": {"name": TYPED, ...},
//    "headers": {"correlationId": "..", "type": "..", "replyTo": "queue://..", "priority": 0-9,
//                "deliveryMode": "PERSISTENT"|"NON_PERSISTENT", "expiration": <time-to-live ms>}}
//   TYPED = {"type": "boolean|byte|short|int|long|float|double|char|String|byte[]", "value": ...}
//           (byte[] takes "base64" or "hex" instead of "value"; Java class names are accepted as types)
//   body: Text -> string or null; Bytes -> {"base64": ".."} or {"hex": ".."}; Map -> {"k": TYPED};
//         Stream -> [TYPED, ...]; Object -> {"class": "java.util.HashMap", "value": {"k": TYPED}}
//         or {"class": "java.lang.String" | "java.math.BigDecimal", "value": ".."}; Message -> absent.
// Received messages are printed the same way, with "type" of every TYPED being the Java class name
// (java.lang.Integer, ...; "byte[]" with both "base64" and "hex"), plus "class" (the JMS message class)
// and headers messageId, destination, timestamp, redelivered.

import java.io.InputStream;
import java.io.Serializable;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Destination;
import javax.jms.JMSException;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageEOFException;
import javax.jms.MessageProducer;
import javax.jms.ObjectMessage;
import javax.jms.Session;
import javax.jms.StreamMessage;
import javax.jms.TextMessage;

import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQDestination;

public final class JmsTool {
    private JmsTool() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage("missing command");
        }
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                usage("bad option " + args[i]);
            }
            opts.put(args[i].substring(2), args[i + 1]);
        }
        String url = need(opts, "url");
        if (args[0].equals("serve")) {
            serve(url);
            return;
        }
        String dest = need(opts, "dest");
        Connection connection = connect(url);
        try {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            switch (args[0]) {
                case "send" -> {
                    for (String id : send(session, dest, new Json(readAll(System.in)).parseDocument())) {
                        System.out.println(Json.write(Map.of("sent", id)));
                    }
                }
                case "receive" -> {
                    int count = Integer.parseInt(opts.getOrDefault("count", "1"));
                    long timeout = Long.parseLong(opts.getOrDefault("timeout-ms", "10000"));
                    List<Map<String, Object>> got = receive(session, dest, count, timeout, opts.get("selector"),
                            m -> {
                                System.out.println(Json.write(m));
                                System.out.flush();
                            });
                    if (got.size() < count) {
                        System.err.println("received " + got.size() + " of " + count + " before the timeout");
                        System.out.flush();
                        connection.close();
                        System.exit(3);
                    }
                }
                default -> usage("unknown command " + args[0]);
            }
        } finally {
            connection.close();
        }
    }

    static Connection connect(String url) throws JMSException {
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(url);
        factory.setAlwaysSyncSend(true); // send() returns once the broker has accepted the message
        factory.setTrustAllPackages(true);
        factory.getPrefetchPolicy().setQueuePrefetch(1); // take no more from a queue than asked for
        Connection connection = factory.createConnection();
        connection.start();
        return connection;
    }

    /**
     * One JVM for many commands: reads one JSON command per stdin line and answers one JSON line.
     * {"op":"send","dest":D,"messages":[...]} -> {"sent":[ids]};
     * {"op":"receive","dest":D,"count":N,"timeoutMs":T,"selector":S} -> {"messages":[...]};
     * {"op":"request","dest":D,"message":M,"timeoutMs":T} -> {"sent":id,"replyTo":temp,"reply":msg|null}
     * (what javax.jms.QueueRequestor does: JMSReplyTo = a TemporaryQueue of this connection);
     * failures -> {"error":"..."}. The connection is re-opened when the broker went away.
     */
    @SuppressWarnings("unchecked")
    static void serve(String url) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        Connection connection = null;
        System.out.println(Json.write(Map.of("ready", true)));
        System.out.flush();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            Map<String, Object> reply = new LinkedHashMap<>();
            try {
                Map<String, Object> cmd = (Map<String, Object>) new Json(line).parseDocument();
                if (connection == null || ((org.apache.activemq.ActiveMQConnection) connection).isTransportFailed()
                        || ((org.apache.activemq.ActiveMQConnection) connection).isClosed()) {
                    if (connection != null) {
                        closeQuietly(connection);
                    }
                    connection = null;
                    connection = connect(url);
                }
                Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                try {
                    String dest = (String) cmd.get("dest");
                    switch ((String) cmd.get("op")) {
                        case "send" -> reply.put("sent", send(session, dest, cmd.get("messages")));
                        case "request" -> reply.putAll(request(session, dest, (Map<String, Object>) cmd.get("message"),
                                ((BigDecimal) cmd.getOrDefault("timeoutMs", BigDecimal.valueOf(10000))).longValueExact()));
                        case "receive" -> reply.put("messages", receive(session, dest,
                                ((BigDecimal) cmd.getOrDefault("count", BigDecimal.ONE)).intValueExact(),
                                ((BigDecimal) cmd.getOrDefault("timeoutMs", BigDecimal.valueOf(10000))).longValueExact(),
                                (String) cmd.get("selector"), m -> { }));
                        default -> throw new IllegalArgumentException("unknown op " + cmd.get("op"));
                    }
                } finally {
                    session.close();
                }
            } catch (Exception e) {
                reply.clear();
                reply.put("error", e.toString());
                if (e instanceof JMSException && connection != null) {
                    closeQuietly(connection);
                    connection = null;
                }
            }
            System.out.println(Json.write(reply));
            System.out.flush();
        }
        if (connection != null) {
            closeQuietly(connection);
        }
    }

    static void closeQuietly(Connection c) {
        try {
            c.close();
        } catch (JMSException | RuntimeException e) {
            System.err.println("closing connection: " + e);
        }
    }

    private static void usage(String why) {
        System.err.println("JmsTool: " + why);
        System.err.println("usage: JmsTool send|receive --url URL --dest queue://NAME|topic://NAME [...]");
        System.exit(2);
    }

    private static String need(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            usage("missing --" + key);
        }
        return v;
    }

    private static String readAll(InputStream in) throws Exception {
        return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }

    static Destination destination(String name) {
        return ActiveMQDestination.createDestination(name, ActiveMQDestination.QUEUE_TYPE);
    }

    // ---------------------------------------------------------------- send

    @SuppressWarnings("unchecked")
    static List<String> send(Session session, String dest, Object parsed) throws Exception {
        List<Object> specs = parsed instanceof List ? (List<Object>) parsed : List.of(parsed);
        MessageProducer producer = session.createProducer(null);
        List<String> ids = new ArrayList<>();
        for (Object s : specs) {
            Map<String, Object> spec = (Map<String, Object>) s;
            Destination to = destination((String) spec.getOrDefault("destination", dest));
            Message m = build(session, spec);
            Map<String, Object> h = (Map<String, Object>) spec.getOrDefault("headers", Map.of());
            int deliveryMode = "NON_PERSISTENT".equals(h.get("deliveryMode"))
                    ? DeliveryMode.NON_PERSISTENT : DeliveryMode.PERSISTENT;
            int priority = h.containsKey("priority") ? ((BigDecimal) h.get("priority")).intValueExact()
                    : Message.DEFAULT_PRIORITY;
            long ttl = h.containsKey("expiration") ? ((BigDecimal) h.get("expiration")).longValueExact() : 0L;
            producer.send(to, m, deliveryMode, priority, ttl);
            ids.add(m.getJMSMessageID());
        }
        producer.close();
        return ids;
    }

    /** Send one message with JMSReplyTo = a new TemporaryQueue and wait for one reply on it. */
    static Map<String, Object> request(Session session, String dest, Map<String, Object> spec, long timeoutMs)
            throws Exception {
        javax.jms.TemporaryQueue inbox = session.createTemporaryQueue();
        MessageConsumer consumer = session.createConsumer(inbox);
        try {
            Message m = build(session, spec);
            m.setJMSReplyTo(inbox);
            MessageProducer producer = session.createProducer(destination(dest));
            producer.send(m);
            producer.close();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("sent", m.getJMSMessageID());
            out.put("replyTo", inbox.toString());
            Message reply = consumer.receive(timeoutMs);
            out.put("reply", reply == null ? null : describe(reply));
            return out;
        } finally {
            consumer.close();
            inbox.delete();
        }
    }

    @SuppressWarnings("unchecked")
    static Message build(Session session, Map<String, Object> spec) throws Exception {
        String type = (String) spec.getOrDefault("type", "Text");
        Object body = spec.get("body");
        Message m;
        switch (type) {
            case "Text" -> m = session.createTextMessage((String) body);
            case "Bytes" -> {
                BytesMessage b = session.createBytesMessage();
                if (body != null) {
                    b.writeBytes(bytesOf((Map<String, Object>) body));
                }
                m = b;
            }
            case "Map" -> {
                MapMessage mm = session.createMapMessage();
                for (Map.Entry<String, Object> e : ((Map<String, Object>) body).entrySet()) {
                    mm.setObject(e.getKey(), typed((Map<String, Object>) e.getValue()));
                }
                m = mm;
            }
            case "Stream" -> {
                StreamMessage sm = session.createStreamMessage();
                for (Object item : (List<Object>) body) {
                    sm.writeObject(typed((Map<String, Object>) item));
                }
                m = sm;
            }
            case "Object" -> {
                Map<String, Object> ob = (Map<String, Object>) body;
                String cls = (String) ob.get("class");
                Serializable value;
                if ("java.lang.String".equals(cls)) {
                    value = (String) ob.get("value");
                } else if ("java.util.HashMap".equals(cls)) {
                    HashMap<String, Object> map = new HashMap<>();
                    for (Map.Entry<String, Object> e : ((Map<String, Object>) ob.get("value")).entrySet()) {
                        map.put(e.getKey(), typed((Map<String, Object>) e.getValue()));
                    }
                    value = map;
                } else if ("java.math.BigDecimal".equals(cls)) {   // outside ActiveMQ's default trusted packages
                    value = new java.math.BigDecimal((String) ob.get("value"));
                } else {
                    throw new IllegalArgumentException("Object body class must be java.lang.String, "
                            + "java.util.HashMap or java.math.BigDecimal, not " + cls);
                }
                m = session.createObjectMessage(value);
            }
            case "Message" -> m = session.createMessage();
            default -> throw new IllegalArgumentException("unknown message type " + type);
        }
        Map<String, Object> props = (Map<String, Object>) spec.getOrDefault("properties", Map.of());
        for (Map.Entry<String, Object> e : props.entrySet()) {
            m.setObjectProperty(e.getKey(), typed((Map<String, Object>) e.getValue()));
        }
        Map<String, Object> h = (Map<String, Object>) spec.getOrDefault("headers", Map.of());
        if (h.containsKey("correlationId")) {
            m.setJMSCorrelationID((String) h.get("correlationId"));
        }
        if (h.containsKey("type")) {
            m.setJMSType((String) h.get("type"));
        }
        if (h.containsKey("replyTo")) {
            m.setJMSReplyTo(destination((String) h.get("replyTo")));
        }
        return m;
    }

    static byte[] bytesOf(Map<String, Object> v) {
        if (v.containsKey("base64")) {
            return Base64.getDecoder().decode((String) v.get("base64"));
        }
        if (v.containsKey("hex")) {
            String hex = (String) v.get("hex");
            byte[] out = new byte[hex.length() / 2];
            for (int i = 0; i < out.length; i++) {
                out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            }
            return out;
        }
        throw new IllegalArgumentException("bytes need base64 or hex: " + v);
    }

    /** A TYPED JSON value -> the Java object of exactly that type. */
    static Object typed(Map<String, Object> tv) {
        String t = (String) tv.get("type");
        Object v = tv.get("value");
        switch (t) {
            case "byte[]":
                return bytesOf(tv);
            case "String": case "java.lang.String":
                return (String) v;
            case "char": case "java.lang.Character":
                String s = (String) v;
                if (s.length() != 1) {
                    throw new IllegalArgumentException("char needs a one-character string: " + s);
                }
                return s.charAt(0);
            case "boolean": case "java.lang.Boolean":
                return (Boolean) v;
            default:
                break;
        }
        if (v == null) {
            throw new IllegalArgumentException("no value for " + tv);
        }
        if (t.equals("float") || t.equals("java.lang.Float")) {
            return Float.parseFloat(v.toString()); // correctly rounded; "NaN"/"Infinity" strings accepted
        }
        if (t.equals("double") || t.equals("java.lang.Double")) {
            return Double.parseDouble(v.toString());
        }
        BigDecimal n = v instanceof BigDecimal ? (BigDecimal) v : new BigDecimal((String) v);
        return switch (t) {
            case "byte", "java.lang.Byte" -> n.byteValueExact();
            case "short", "java.lang.Short" -> n.shortValueExact();
            case "int", "java.lang.Integer" -> n.intValueExact();
            case "long", "java.lang.Long" -> n.longValueExact();
            default -> throw new IllegalArgumentException("unknown type " + t);
        };
    }

    // ---------------------------------------------------------------- receive

    static List<Map<String, Object>> receive(Session session, String dest, int count, long timeoutMs,
            String selector, java.util.function.Consumer<Map<String, Object>> each) throws Exception {
        MessageConsumer consumer = session.createConsumer(destination(dest), selector);
        System.err.println("READY");
        System.err.flush();
        long deadline = System.currentTimeMillis() + timeoutMs;
        List<Map<String, Object>> got = new ArrayList<>();
        while (got.size() < count) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                break;
            }
            Message m = consumer.receive(left);
            if (m == null) {
                break;
            }
            Map<String, Object> d = describe(m);
            each.accept(d);
            got.add(d);
        }
        consumer.close();
        return got;
    }

    static Map<String, Object> describe(Message m) throws JMSException {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("class", m.getClass().getName());
        Map<String, Object> h = new LinkedHashMap<>();
        h.put("messageId", m.getJMSMessageID());
        h.put("destination", str(m.getJMSDestination()));
        h.put("correlationId", m.getJMSCorrelationID());
        h.put("type", m.getJMSType());
        h.put("replyTo", str(m.getJMSReplyTo()));
        h.put("priority", m.getJMSPriority());
        h.put("deliveryMode", m.getJMSDeliveryMode() == DeliveryMode.PERSISTENT ? "PERSISTENT" : "NON_PERSISTENT");
        h.put("expiration", m.getJMSExpiration());
        h.put("timestamp", m.getJMSTimestamp());
        h.put("redelivered", m.getJMSRedelivered());
        Map<String, Object> props = new TreeMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) {
            String name = (String) e.nextElement();
            props.put(name, typedOut(m.getObjectProperty(name)));
        }
        if (m instanceof TextMessage t) {
            d.put("type", "Text");
            d.put("body", t.getText());
        } else if (m instanceof BytesMessage b) {
            d.put("type", "Bytes");
            byte[] data = new byte[(int) b.getBodyLength()];
            b.readBytes(data);
            d.put("body", typedOut(data));
        } else if (m instanceof MapMessage mm) {
            d.put("type", "Map");
            Map<String, Object> body = new TreeMap<>();
            for (Enumeration<?> e = mm.getMapNames(); e.hasMoreElements();) {
                String name = (String) e.nextElement();
                body.put(name, typedOut(mm.getObject(name)));
            }
            d.put("body", body);
        } else if (m instanceof StreamMessage sm) {
            d.put("type", "Stream");
            List<Object> items = new ArrayList<>();
            while (true) {
                try {
                    items.add(typedOut(sm.readObject()));
                } catch (MessageEOFException eof) {
                    break;
                }
            }
            d.put("body", items);
        } else if (m instanceof ObjectMessage om) {
            d.put("type", "Object");
            Serializable o = om.getObject();
            Map<String, Object> body = new LinkedHashMap<>();
            body.put("class", o == null ? null : o.getClass().getName());
            if (o instanceof Map<?, ?> map) {
                Map<String, Object> entries = new TreeMap<>();
                for (Map.Entry<?, ?> e : map.entrySet()) {
                    entries.put(String.valueOf(e.getKey()), typedOut(e.getValue()));
                }
                body.put("value", entries);
            } else {
                body.put("value", o == null ? null : o.toString());
            }
            d.put("body", body);
        } else {
            d.put("type", "Message");
            d.put("body", null);
        }
        d.put("headers", h);
        d.put("properties", props);
        return d;
    }

    static String str(Object o) {
        return o == null ? null : o.toString();
    }

    /** A Java value -> {"type": <Java class name>, "value": ...} (byte[] -> base64 and hex). */
    static Map<String, Object> typedOut(Object v) {
        Map<String, Object> t = new LinkedHashMap<>();
        if (v == null) {
            t.put("type", null);
            t.put("value", null);
        } else if (v instanceof byte[] bytes) {
            t.put("type", "byte[]");
            t.put("base64", Base64.getEncoder().encodeToString(bytes));
            StringBuilder hex = new StringBuilder();
            for (byte b : bytes) {
                hex.append(String.format("%02x", b & 0xff));
            }
            t.put("hex", hex.toString());
        } else {
            t.put("type", v.getClass().getName());
            if (v instanceof Character c) {
                t.put("value", String.valueOf(c));
            } else if (v instanceof Number || v instanceof Boolean || v instanceof String) {
                t.put("value", v);
            } else {
                t.put("value", v.toString());
            }
        }
        return t;
    }

    // ---------------------------------------------------------------- tiny JSON

    /** Parses JSON into LinkedHashMap / ArrayList / String / BigDecimal / Boolean / null; writes it back. */
    static final class Json {
        private final String s;
        private int i;

        Json(String s) {
            this.s = s;
        }

        Object parseDocument() {
            Object v = value();
            ws();
            if (i != s.length()) {
                throw err("trailing characters");
            }
            return v;
        }

        private IllegalArgumentException err(String what) {
            return new IllegalArgumentException("JSON: " + what + " at offset " + i);
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private boolean eat(char c) {
            ws();
            if (i < s.length() && s.charAt(i) == c) {
                i++;
                return true;
            }
            return false;
        }

        private void expect(char c) {
            if (!eat(c)) {
                throw err("expected '" + c + "'");
            }
        }

        private Object value() {
            ws();
            if (i >= s.length()) {
                throw err("unexpected end");
            }
            char c = s.charAt(i);
            if (c == '{') {
                i++;
                Map<String, Object> m = new LinkedHashMap<>();
                if (eat('}')) {
                    return m;
                }
                do {
                    ws();
                    String k = string();
                    expect(':');
                    m.put(k, value());
                } while (eat(','));
                expect('}');
                return m;
            }
            if (c == '[') {
                i++;
                List<Object> l = new ArrayList<>();
                if (eat(']')) {
                    return l;
                }
                do {
                    l.add(value());
                } while (eat(','));
                expect(']');
                return l;
            }
            if (c == '"') {
                return string();
            }
            for (String lit : new String[] {"true", "false", "null"}) {
                if (s.startsWith(lit, i)) {
                    i += lit.length();
                    return lit.equals("null") ? null : Boolean.valueOf(lit);
                }
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            if (start == i) {
                throw err("unexpected character '" + c + "'");
            }
            return new BigDecimal(s.substring(start, i));
        }

        private String string() {
            if (i >= s.length() || s.charAt(i) != '"') {
                throw err("expected string");
            }
            i++;
            StringBuilder b = new StringBuilder();
            while (true) {
                if (i >= s.length()) {
                    throw err("unterminated string");
                }
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                    }
                    default -> b.append(e); // \" \\ \/
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof String str) {
                b.append('"');
                for (int k = 0; k < str.length(); k++) {
                    char c = str.charAt(k);
                    if (c == '"' || c == '\\') {
                        b.append('\\').append(c);
                    } else if (c < 0x20 || c > 0x7e) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
                b.append('"');
            } else if (v instanceof Float f && (f.isNaN() || f.isInfinite())) {
                write(b, f.toString());
            } else if (v instanceof Double dbl && (dbl.isNaN() || dbl.isInfinite())) {
                write(b, dbl.toString());
            } else if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else if (v instanceof Map<?, ?> m) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    write(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof List<?> l) {
                b.append('[');
                for (int k = 0; k < l.size(); k++) {
                    if (k > 0) {
                        b.append(',');
                    }
                    write(b, l.get(k));
                }
                b.append(']');
            } else {
                write(b, v.toString());
            }
        }
    }
}
