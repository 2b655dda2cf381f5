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
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

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
 *   list-transactions           listTransactions (id, producer id, state of each)
 *   describe-transactions ID... describeTransactions (state, producer, timeout, partitions)
 *   describe-producers TP       describeProducers (id, epoch, open transaction's start)
 *   abort-transaction TP PID EPOCH COORDINATOR_EPOCH   abortTransaction (KIP-664)
 *   list-share-groups           listGroups(ListGroupsOptions.forShareGroups())
 *   describe-share-groups GROUP...   describeShareGroups
 *   list-share-offsets GROUP    listShareGroupOffsets (every partition with share state)
 *   alter-share-offsets GROUP TP=OFFSET...   alterShareGroupOffsets
 *   delete-share-offsets GROUP TOPIC...      deleteShareGroupOffsets
 *   create-acls ACL...          createAcls (a result per ACL)
 *   describe-acls [ACL]         describeAcls (every ACL when no filter is given)
 *   delete-acls ACL...          deleteAcls (the ACLs each filter removed, or its error)
 *   exit
 * An ACL (or a filter) is TYPE,PATTERN,NAME,PRINCIPAL,HOST,OPERATION,PERMISSION in Kafka's
 * names (any case); in a filter "null" is any name, principal or host.
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
        COMMANDS.put("list-transactions", AdminDriver::listTransactions);
        COMMANDS.put("describe-transactions", AdminDriver::describeTransactions);
        COMMANDS.put("describe-producers", AdminDriver::describeProducers);
        COMMANDS.put("abort-transaction", AdminDriver::abortTransaction);
        COMMANDS.put("list-share-groups", AdminDriver::listShareGroups);
        COMMANDS.put("describe-share-groups", AdminDriver::describeShareGroups);
        COMMANDS.put("list-share-offsets", AdminDriver::listShareOffsets);
        COMMANDS.put("alter-share-offsets", AdminDriver::alterShareOffsets);
        COMMANDS.put("delete-share-offsets", AdminDriver::deleteShareOffsets);
        COMMANDS.put("create-acls", AdminDriver::createAcls);
        COMMANDS.put("describe-acls", AdminDriver::describeAcls);
        COMMANDS.put("delete-acls", AdminDriver::deleteAcls);
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

    static Map<String, Object> listShareGroups(Admin admin, List<String> words) throws Exception {
        List<Object> groups = new ArrayList<>();
        for (GroupListing g : get(admin.listGroups(ListGroupsOptions.forShareGroups()).all())) {
            groups.add(Json.obj("group", g.groupId(),
                    "state", g.groupState().map(Object::toString).orElse(null),
                    "type", g.type().map(Object::toString).orElse(null),
                    "protocol", g.protocol()));
        }
        return Json.obj("groups", groups);
    }

    static Map<String, Object> describeShareGroups(Admin admin, List<String> groups)
            throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, KafkaFuture<ShareGroupDescription>> futures =
                admin.describeShareGroups(groups).describedGroups();
        for (String group : groups) {
            try {
                ShareGroupDescription d = get(futures.get(group));
                List<Object> members = new ArrayList<>();
                for (ShareMemberDescription m : d.members()) {
                    members.add(Json.obj("member", m.consumerId(), "client", m.clientId(),
                            "epoch", m.memberEpoch(),
                            "assignment", Json.tps(m.assignment().topicPartitions())));
                }
                out.put(group, Json.obj("state", d.groupState().toString(),
                        "epoch", d.groupEpoch(), "assignment_epoch", d.targetAssignmentEpoch(),
                        "members", members));
            } catch (Exception e) {
                out.put(group, Json.obj("error", Conf.error(e)));
            }
        }
        return Json.obj("groups", out);
    }

    static Map<String, Object> listShareOffsets(Admin admin, List<String> words)
            throws Exception {
        String group = words.get(0);
        Map<TopicPartition, SharePartitionOffsetInfo> offsets = get(admin.listShareGroupOffsets(
                Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group));
        Map<String, Object> out = new java.util.TreeMap<>();
        for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
            SharePartitionOffsetInfo o = e.getValue();
            out.put(name(e.getKey()), o == null ? null : Json.obj("start", o.startOffset(),
                    "lag", o.lag().orElse(null)));
        }
        return Json.obj("offsets", out);
    }

    static Map<String, Object> alterShareOffsets(Admin admin, List<String> words)
            throws Exception {
        Map<TopicPartition, Long> offsets = new HashMap<>();
        for (String w : words.subList(1, words.size())) {
            String[] kv = w.split("=");
            offsets.put(tp(kv[0]), Long.parseLong(kv[1]));
        }
        return Json.obj("all", error(admin.alterShareGroupOffsets(words.get(0), offsets).all()));
    }

    static Map<String, Object> deleteShareOffsets(Admin admin, List<String> words)
            throws Exception {
        Set<String> topics = new HashSet<>(words.subList(1, words.size()));
        return Json.obj("all", error(admin.deleteShareGroupOffsets(words.get(0), topics).all()));
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

    static Map<String, Object> listTransactions(Admin admin, List<String> words)
            throws Exception {
        List<Object> out = new ArrayList<>();
        for (TransactionListing t : get(admin.listTransactions().all())) {
            out.add(Json.obj("id", t.transactionalId(), "producer_id", t.producerId(),
                    "state", t.state().toString()));
        }
        return Json.obj("transactions", out);
    }

    static Map<String, Object> describeTransactions(Admin admin, List<String> words)
            throws Exception {
        Map<String, Object> out = new java.util.TreeMap<>();
        for (Map.Entry<String, TransactionDescription> e
                : get(admin.describeTransactions(words).all()).entrySet()) {
            TransactionDescription d = e.getValue();
            List<String> parts = new ArrayList<>();
            for (TopicPartition tp : d.topicPartitions()) {
                parts.add(tp.topic() + ":" + tp.partition());
            }
            java.util.Collections.sort(parts);
            out.put(e.getKey(), Json.obj("state", d.state().toString(),
                    "producer_id", d.producerId(), "epoch", d.producerEpoch(),
                    "timeout_ms", d.transactionTimeoutMs(),
                    "started", d.transactionStartTimeMs().isPresent(), "partitions", parts));
        }
        return Json.obj("transactions", out);
    }

    static Map<String, Object> describeProducers(Admin admin, List<String> words)
            throws Exception {
        String[] tp = words.get(0).split(":");
        TopicPartition partition = new TopicPartition(tp[0], Integer.parseInt(tp[1]));
        List<Object> out = new ArrayList<>();
        for (ProducerState s : get(admin.describeProducers(List.of(partition))
                .partitionResult(partition)).activeProducers()) {
            out.add(Json.obj("producer_id", s.producerId(), "epoch", s.producerEpoch(),
                    "txn_start", s.currentTransactionStartOffset().isPresent()
                            ? s.currentTransactionStartOffset().getAsLong() : null));
        }
        return Json.obj("producers", out);
    }

    static Map<String, Object> abortTransaction(Admin admin, List<String> words)
            throws Exception {
        get(admin.abortTransaction(new AbortTransactionSpec(tp(words.get(0)),
                Long.parseLong(words.get(1)), Short.parseShort(words.get(2)),
                Integer.parseInt(words.get(3)))).all());
        return Json.obj();
    }

    static String nullable(String s) {
        return s.equals("null") ? null : s;
    }

    /** The fields of an ACL spec, the enum names upper-cased (Kafka's fromString wants them so). */
    static String[] fields(String spec) {
        String[] f = spec.split(",", -1);
        for (int i : new int[] {0, 1, 5, 6}) {
            f[i] = f[i].toUpperCase(java.util.Locale.ROOT);
        }
        return f;
    }

    static AclBindingFilter filter(String spec) {
        String[] f = fields(spec);
        return new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.fromString(f[0]), nullable(f[2]),
                        PatternType.fromString(f[1])),
                new AccessControlEntryFilter(nullable(f[3]), nullable(f[4]),
                        AclOperation.fromString(f[5]), AclPermissionType.fromString(f[6])));
    }

    static AclBinding binding(String spec) {
        String[] f = fields(spec);
        return new AclBinding(
                new ResourcePattern(ResourceType.fromString(f[0]), f[2],
                        PatternType.fromString(f[1])),
                new AccessControlEntry(f[3], f[4], AclOperation.fromString(f[5]),
                        AclPermissionType.fromString(f[6])));
    }

    static String spec(AclBinding b) {
        return String.join(",", b.pattern().resourceType().toString(),
                b.pattern().patternType().toString(), b.pattern().name(), b.entry().principal(),
                b.entry().host(), b.entry().operation().toString(),
                b.entry().permissionType().toString());
    }

    static Map<String, Object> createAcls(Admin admin, List<String> specs) throws Exception {
        List<AclBinding> acls = new ArrayList<>();
        for (String s : specs) {
            acls.add(binding(s));
        }
        Map<AclBinding, KafkaFuture<Void>> results = admin.createAcls(acls).values();
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < acls.size(); i++) {
            out.put(specs.get(i), error(results.get(acls.get(i))));
        }
        return Json.obj("errors", out);
    }

    static Map<String, Object> describeAcls(Admin admin, List<String> words) throws Exception {
        AclBindingFilter f = words.isEmpty() ? AclBindingFilter.ANY : filter(words.get(0));
        List<Object> acls = new ArrayList<>();
        for (AclBinding b : get(admin.describeAcls(f).values())) {
            acls.add(spec(b));
        }
        return Json.obj("acls", acls);
    }

    static Map<String, Object> deleteAcls(Admin admin, List<String> specs) throws Exception {
        List<AclBindingFilter> filters = new ArrayList<>();
        for (String s : specs) {
            filters.add(filter(s));
        }
        var results = admin.deleteAcls(filters).values();
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < filters.size(); i++) {
            try {
                List<Object> deleted = new ArrayList<>();
                for (var r : get(results.get(filters.get(i))).values()) {
                    deleted.add(r.exception() != null ? Conf.error(r.exception())
                            : spec(r.binding()));
                }
                out.put(specs.get(i), Json.obj("deleted", deleted));
            } catch (Exception e) {
                out.put(specs.get(i), Json.obj("error", Conf.error(e)));
            }
        }
        return Json.obj("results", out);
    }
}
