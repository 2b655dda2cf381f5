import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

/**
 * Apache Kafka's Admin client driven by commands on stdin, one per line, words separated by
 * spaces; each command gets one JSON reply line {"reply": NAME, "ok": bool, ...}.
 * Usage: AdminDriver BOOTSTRAP [key=value admin config...]
 *
 * Commands (TP is TOPIC:PARTITION):
 *   list-groups                 listConsumerGroups
 *   describe-groups GROUP...    describeConsumerGroups
 *   delete-groups GROUP...      deleteConsumerGroups (a result per group)
 *   list-offsets GROUP          listConsumerGroupOffsets
 *   alter-offsets GROUP TP=OFFSET...   alterConsumerGroupOffsets (a result per partition)
 *   delete-offsets GROUP TP...  deleteConsumerGroupOffsets (a result per partition)
 *   describe-features           describeFeatures (finalized and supported, epoch)
 *   exit
 * To add a command, add a method taking (Admin, words) and returning the reply's fields,
 * and register it in COMMANDS.
 */
public final class AdminDriver {
    interface Command {
        Map<String, Object> run(Admin admin, List<String> words) throws Exception;
    }

    static final long TIMEOUT_S = 30;
    static final Map<String, Command> COMMANDS = new LinkedHashMap<>();

    static {
        COMMANDS.put("list-groups", AdminDriver::listGroups);
        COMMANDS.put("describe-groups", AdminDriver::describeGroups);
        COMMANDS.put("delete-groups", AdminDriver::deleteGroups);
        COMMANDS.put("list-offsets", AdminDriver::listOffsets);
        COMMANDS.put("alter-offsets", AdminDriver::alterOffsets);
        COMMANDS.put("delete-offsets", AdminDriver::deleteOffsets);
        COMMANDS.put("describe-features", AdminDriver::describeFeatures);
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.putAll(Conf.client(args, 1));
        try (Admin admin = Admin.create(p);
             BufferedReader in = new BufferedReader(
                     new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            Json.emit(Json.obj("event", "started"));
            String line;
            while ((line = in.readLine()) != null) {
                List<String> words = Arrays.asList(line.trim().split("\\s+"));
                String name = words.get(0);
                if (name.equals("exit")) {
                    break;
                }
                Map<String, Object> reply = Json.obj("reply", name, "ok", true);
                Command cmd = COMMANDS.get(name);
                try {
                    if (cmd == null) {
                        throw new IllegalArgumentException("unknown command " + name);
                    }
                    reply.putAll(cmd.run(admin, words.subList(1, words.size())));
                } catch (Exception e) {
                    reply.put("ok", false);
                    reply.put("error", Conf.error(e));
                }
                Json.emit(reply);
            }
        }
    }

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(TIMEOUT_S, TimeUnit.SECONDS);
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

    static TopicPartition tp(String s) {
        int colon = s.lastIndexOf(':');
        return new TopicPartition(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)));
    }

    static String name(TopicPartition tp) {
        return tp.topic() + ":" + tp.partition();
    }

    @SuppressWarnings("removal") // the API under test; Kafka 4.1 deprecated it for listGroups
    static Map<String, Object> listGroups(Admin admin, List<String> words) throws Exception {
        List<Object> groups = new ArrayList<>();
        for (ConsumerGroupListing g : get(admin.listConsumerGroups().all())) {
            groups.add(Json.obj("group", g.groupId(), "simple", g.isSimpleConsumerGroup(),
                    "state", g.groupState().map(Object::toString).orElse(null),
                    "type", g.type().map(Object::toString).orElse(null)));
        }
        return Json.obj("groups", groups);
    }

    static Map<String, Object> describeGroups(Admin admin, List<String> groups) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, KafkaFuture<ConsumerGroupDescription>> futures =
                admin.describeConsumerGroups(groups).describedGroups();
        for (String group : groups) {
            try {
                ConsumerGroupDescription d = get(futures.get(group));
                List<Object> members = new ArrayList<>();
                for (MemberDescription m : d.members()) {
                    members.add(Json.obj("member", m.consumerId(),
                            "instance", m.groupInstanceId().orElse(null),
                            "client", m.clientId(), "host", m.host(),
                            "assignment", Json.tps(m.assignment().topicPartitions())));
                }
                out.put(group, Json.obj("state", d.groupState().toString(),
                        "type", d.type().toString(), "assignor", d.partitionAssignor(),
                        "simple", d.isSimpleConsumerGroup(),
                        "coordinator", d.coordinator() == null ? null : d.coordinator().id(),
                        "members", members));
            } catch (Exception e) {
                out.put(group, Json.obj("error", Conf.error(e)));
            }
        }
        return Json.obj("groups", out);
    }

    static Map<String, Object> deleteGroups(Admin admin, List<String> groups) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, KafkaFuture<Void>> futures = admin.deleteConsumerGroups(groups).deletedGroups();
        for (String group : groups) {
            out.put(group, error(futures.get(group)));
        }
        return Json.obj("errors", out);
    }

    static Map<String, Object> listOffsets(Admin admin, List<String> words) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                get(admin.listConsumerGroupOffsets(words.get(0)).partitionsToOffsetAndMetadata());
        Map<String, Object> out = new java.util.TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            OffsetAndMetadata o = e.getValue();
            out.put(name(e.getKey()), o == null ? null : Json.obj("offset", o.offset(),
                    "metadata", o.metadata()));
        }
        return Json.obj("offsets", out);
    }

    static Map<String, Object> alterOffsets(Admin admin, List<String> words) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (String w : words.subList(1, words.size())) {
            String[] kv = w.split("=");
            offsets.put(tp(kv[0]), new OffsetAndMetadata(Long.parseLong(kv[1]), "by-java-admin"));
        }
        var result = admin.alterConsumerGroupOffsets(words.get(0), offsets);
        Map<String, Object> out = new java.util.TreeMap<>();
        for (TopicPartition tp : offsets.keySet()) {
            out.put(name(tp), error(result.partitionResult(tp)));
        }
        return Json.obj("errors", out, "all", error(result.all()));
    }

    static Map<String, Object> deleteOffsets(Admin admin, List<String> words) throws Exception {
        Set<TopicPartition> tps = new HashSet<>();
        for (String w : words.subList(1, words.size())) {
            tps.add(tp(w));
        }
        var result = admin.deleteConsumerGroupOffsets(words.get(0), tps);
        Map<String, Object> out = new java.util.TreeMap<>();
        for (TopicPartition tp : tps) {
            out.put(name(tp), error(result.partitionResult(tp)));
        }
        return Json.obj("errors", out, "all", error(result.all()));
    }

    static Map<String, Object> describeFeatures(Admin admin, List<String> words)
            throws Exception {
        FeatureMetadata m = get(admin.describeFeatures().featureMetadata());
        Map<String, Object> finalized = new java.util.TreeMap<>();
        for (Map.Entry<String, FinalizedVersionRange> e : m.finalizedFeatures().entrySet()) {
            finalized.put(e.getKey(), List.of(e.getValue().minVersionLevel(),
                    e.getValue().maxVersionLevel()));
        }
        Map<String, Object> supported = new java.util.TreeMap<>();
        for (Map.Entry<String, SupportedVersionRange> e : m.supportedFeatures().entrySet()) {
            supported.put(e.getKey(), List.of(e.getValue().minVersion(),
                    e.getValue().maxVersion()));
        }
        return Json.obj("finalized", finalized, "supported", supported,
                "epoch", m.finalizedFeaturesEpoch().orElse(null));
    }
}
