import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.AlterConfigsResult;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Apache Kafka's Admin client on configs: each argument after the bootstrap is one operation,
 * its words separated by spaces, run in order; each prints one JSON line
 * {"op": INDEX, "ok": bool, ...}. A resource is TYPE NAME (TYPE topic, broker or group; NAME
 * "" (two double quotes) for the empty name, the cluster-wide broker defaults).
 * Usage: ConfigsDriver BOOTSTRAP OPERATION...
 *
 * Operations:
 *   create TOPIC [KEY=VALUE...]      createTopics, one partition
 *   describe TYPE NAME [KEY...]      describeConfigs with synonyms: {"configs": {KEY: {...}}}
 *   incremental [validate-only] TYPE NAME ACTION... [& TYPE NAME ACTION...]
 *                                    incrementalAlterConfigs of one or more resources; an
 *                                    ACTION is set KEY VALUE, delete KEY, append KEY VALUE or
 *                                    subtract KEY VALUE: {"results": {"TYPE:NAME": error}}
 * An error is "ExceptionClass: message" (null on success); describe puts it in "error".
 * Kafka 4.x removed Admin.alterConfigs (legacy AlterConfigs), so there is no operation for it.
 */
public final class ConfigsDriver {
    static final long TIMEOUT_S = 30;

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        try (Admin admin = Admin.create(p)) {
            for (int i = 1; i < args.length; i++) {
                List<String> words = Arrays.asList(args[i].trim().split("\\s+"));
                Map<String, Object> out = Json.obj("op", i - 1, "ok", true);
                try {
                    out.putAll(run(admin, words.get(0), words.subList(1, words.size())));
                } catch (Exception e) {
                    out.put("ok", false);
                    out.put("error", Conf.error(e));
                }
                Json.emit(out);
            }
        }
    }

    static Map<String, Object> run(Admin admin, String op, List<String> words) throws Exception {
        switch (op) {
            case "create": return create(admin, words);
            case "describe": return describe(admin, words);
            case "incremental": return incremental(admin, words);
            default: throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(TIMEOUT_S, TimeUnit.SECONDS);
    }

    static ConfigResource resource(String type, String name) {
        return new ConfigResource(ConfigResource.Type.valueOf(type.toUpperCase()),
                name.equals("\"\"") ? "" : name);
    }

    static String key(ConfigResource r) {
        return r.type() + ":" + r.name();
    }

    static Map<String, Object> create(Admin admin, List<String> words) throws Exception {
        Map<String, String> configs = new LinkedHashMap<>();
        for (String w : words.subList(1, words.size())) {
            int eq = w.indexOf('=');
            configs.put(w.substring(0, eq), w.substring(eq + 1));
        }
        NewTopic topic = new NewTopic(words.get(0), 1, (short) 1).configs(configs);
        get(admin.createTopics(List.of(topic)).all());
        return Json.obj();
    }

    static Map<String, Object> describe(Admin admin, List<String> words) throws Exception {
        ConfigResource r = resource(words.get(0), words.get(1));
        List<String> keys = words.subList(2, words.size());
        Config config;
        try {
            config = get(admin.describeConfigs(List.of(r),
                    new DescribeConfigsOptions().includeSynonyms(true)).values().get(r));
        } catch (Exception e) {
            return Json.obj("error", Conf.error(e));
        }
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
            if (!keys.isEmpty() && !keys.contains(e.name())) {
                continue;
            }
            List<Object> synonyms = new ArrayList<>();
            for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                synonyms.add(Arrays.asList(s.name(), s.value(), s.source().toString()));
            }
            out.put(e.name(), Json.obj("value", e.value(), "source", e.source().toString(),
                    "default", e.isDefault(), "readOnly", e.isReadOnly(),
                    "sensitive", e.isSensitive(), "type", e.type().toString(),
                    "synonyms", synonyms));
        }
        return Json.obj("error", null, "configs", out);
    }

    static Map<String, Object> incremental(Admin admin, List<String> words) throws Exception {
        boolean validateOnly = !words.isEmpty() && words.get(0).equals("validate-only");
        Map<ConfigResource, Collection<AlterConfigOp>> changes = new LinkedHashMap<>();
        int i = validateOnly ? 1 : 0;
        while (i < words.size()) {
            ConfigResource r = resource(words.get(i), words.get(i + 1));
            List<AlterConfigOp> ops = new ArrayList<>();
            i += 2;
            while (i < words.size() && !words.get(i).equals("&")) {
                AlterConfigOp.OpType type = AlterConfigOp.OpType.valueOf(words.get(i).toUpperCase());
                String value = type == AlterConfigOp.OpType.DELETE ? null : words.get(i + 2);
                ops.add(new AlterConfigOp(new ConfigEntry(words.get(i + 1), value), type));
                i += type == AlterConfigOp.OpType.DELETE ? 2 : 3;
            }
            changes.put(r, ops);
            i++;  // the "&"
        }
        AlterConfigsResult result = admin.incrementalAlterConfigs(changes,
                new AlterConfigsOptions().validateOnly(validateOnly));
        Map<String, Object> errors = new LinkedHashMap<>();
        for (ConfigResource r : changes.keySet()) {
            errors.put(key(r), error(result.values().get(r)));
        }
        return Json.obj("validateOnly", validateOnly, "results", errors);
    }

    /** The error of a finished future as "ClassName: message", or null if it succeeded. */
    static String error(KafkaFuture<?> f) {
        try {
            get(f);
            return null;
        } catch (Exception e) {
            return Conf.error(e);
        }
    }
}
