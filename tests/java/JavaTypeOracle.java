// Answers questions about Java's own float/double text and identifier rules, for tests/test_java_oracle.py.
// Run as a single-file program: java tests/java/JavaTypeOracle.java < queries
// Each input line is one query; each answer is one output line:
//   parsefloat TEXT   -> the 8 hex digits of Float.floatToRawIntBits(Float.parseFloat(TEXT)), or ERR
//   parsedouble TEXT  -> the 16 hex digits of Double.doubleToRawLongBits(Double.parseDouble(TEXT)), or ERR
//   float HEX8        -> Float.toString of the float with those bits
//   double HEX16      -> Double.toString of the double with those bits
//   ident             -> 65536 characters, one per BMP code point: U unassigned, I identifier-ignorable,
//                        S identifier start (and part), P part only, N neither
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

public class JavaTypeOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            int space = line.indexOf(' ');
            String cmd = space < 0 ? line : line.substring(0, space);
            String arg = space < 0 ? "" : line.substring(space + 1);
            switch (cmd) {
                case "parsefloat":
                    try {
                        out.println(String.format("%08x", Float.floatToRawIntBits(Float.parseFloat(arg))));
                    } catch (NumberFormatException e) {
                        out.println("ERR");
                    }
                    break;
                case "parsedouble":
                    try {
                        out.println(String.format("%016x", Double.doubleToRawLongBits(Double.parseDouble(arg))));
                    } catch (NumberFormatException e) {
                        out.println("ERR");
                    }
                    break;
                case "float":
                    out.println(Float.toString(Float.intBitsToFloat((int) Long.parseLong(arg, 16))));
                    break;
                case "double":
                    out.println(Double.toString(Double.longBitsToDouble(Long.parseUnsignedLong(arg, 16))));
                    break;
                case "ident": {
                    StringBuilder sb = new StringBuilder(65536);
                    for (int cp = 0; cp < 65536; cp++) {
                        if (Character.getType(cp) == Character.UNASSIGNED) sb.append('U');
                        else if (Character.isIdentifierIgnorable(cp)) sb.append('I');
                        else if (Character.isJavaIdentifierStart(cp)) sb.append('S');
                        else if (Character.isJavaIdentifierPart(cp)) sb.append('P');
                        else sb.append('N');
                    }
                    out.println(sb);
                    break;
                }
                default:
                    out.println("ERR unknown command");
            }
        }
        out.flush();
    }
}
