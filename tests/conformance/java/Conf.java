import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;

/** Command-line settings: `key=value` arguments become client properties. */
final class Conf {
    private Conf() {}

    /**
     * Every `key=value` argument from index `from` on; keys starting `driver.` are left out.
     * A `driver.system.NAME=value` argument sets the JVM system property NAME (e.g. the
     * OAuth token URLs Kafka's client may read, `org.apache.kafka.sasl.oauthbearer.allowed.urls`).
     */
    static Properties client(String[] args, int from) {
        Properties p = new Properties();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq > 0 && args[i].startsWith("driver.system.")) {
                System.setProperty(args[i].substring("driver.system.".length(), eq),
                        args[i].substring(eq + 1));
            } else if (eq > 0 && !args[i].startsWith("driver.")) {
                p.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
            }
        }
        return p;
    }

    /** The value of a `driver.NAME=value` argument, or `dflt`. */
    static String driver(String[] args, int from, String name, String dflt) {
        String prefix = "driver." + name + "=";
        for (int i = from; i < args.length; i++) {
            if (args[i].startsWith(prefix)) {
                return args[i].substring(prefix.length());
            }
        }
        return dflt;
    }

    /** A throwable as "ClassName: message" (the cause's, when it wraps one). */
    static String error(Throwable t) {
        Throwable c = t.getCause() != null && t instanceof java.util.concurrent.ExecutionException
                ? t.getCause() : t;
        return c.getClass().getSimpleName() + ": " + c.getMessage();
    }

    /** Commands read from stdin by a daemon thread, one per line; "close" at its end. */
    static LinkedBlockingQueue<String> stdinCommands() {
        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    commands.add(line.trim());
                }
            } catch (Exception ignored) {
                // treated as end of input
            }
            commands.add("close");
        });
        stdin.setDaemon(true);
        stdin.start();
        return commands;
    }
}
