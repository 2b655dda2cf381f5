import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.UnreleasedInstanceIdException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A member of a KIP-848 consumer group (group.protocol=consumer). Usage:
 *   ConsumerProtocolMember BOOTSTRAP GROUP TOPICS [key=value consumer config...] [driver.x=y...]
 * TOPICS is a comma-separated list, or with driver.pattern=true one RE2 regex evaluated by the
 * broker (subscribe(SubscriptionPattern)). Driver options: driver.records=false (counts only),
 * driver.commitOnRevoke=true (commitSync, inside onPartitionsRevoked, of what was consumed of
 * the revoked partitions: never position(), which would block on a partition not fetched yet
 * while close() runs the callback), driver.commitEachBatch=true (commitSync of what each poll
 * returned, after every poll that returned records; a failure is an error event with
 * "where": "batch"),
 * driver.maxSeconds=N (exit bound).
 *
 * Events on stdout, one JSON object per line: started, assigned / revoked / lost (the
 * partitions, the whole assignment, the member epoch and id, the wall clock), records, committed, error
 * (fatal: the driver exits), reply, closed. Commands on stdin: "commit" (commitSync of the
 * positions), "assignment", "close". End of stdin closes too.
 */
public final class ConsumerProtocolMember {
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final boolean commitOnRevoke;
    private final boolean commitEachBatch;
    private final boolean printRecords;
    /** The next offset to consume of each partition the member read records of. */
    private final Map<TopicPartition, Long> consumed = new HashMap<>();

    private ConsumerProtocolMember(Properties props, boolean commitOnRevoke,
            boolean commitEachBatch, boolean printRecords) {
        this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
        this.commitOnRevoke = commitOnRevoke;
        this.commitEachBatch = commitEachBatch;
        this.printRecords = printRecords;
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(Conf.client(args, 3));
        ConsumerProtocolMember m = new ConsumerProtocolMember(p,
                Boolean.parseBoolean(Conf.driver(args, 3, "commitOnRevoke", "false")),
                Boolean.parseBoolean(Conf.driver(args, 3, "commitEachBatch", "false")),
                Boolean.parseBoolean(Conf.driver(args, 3, "records", "true")));
        m.run(args[2], Boolean.parseBoolean(Conf.driver(args, 3, "pattern", "false")),
                Long.parseLong(Conf.driver(args, 3, "maxSeconds", "170")));
    }

    private Map<String, Object> state(String event, Collection<TopicPartition> tps) {
        return Json.obj("event", event, "partitions", tps == null ? null : Json.tps(tps),
                "assignment", Json.tps(consumer.assignment()),
                "epoch", consumer.groupMetadata().generationId(),
                "member", consumer.groupMetadata().memberId(),
                "ts", System.currentTimeMillis());
    }

    private Map<TopicPartition, OffsetAndMetadata> positions(Collection<TopicPartition> tps) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (TopicPartition tp : tps) {
            out.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        }
        return out;
    }

    private static List<Object> offsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
        List<Object> out = new ArrayList<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            out.add(List.of(e.getKey().topic(), e.getKey().partition(), e.getValue().offset()));
        }
        return out;
    }

    private final ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> tps) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : tps) {
                Long next = consumed.remove(tp);
                if (next != null) {
                    offsets.put(tp, new OffsetAndMetadata(next));
                }
            }
            if (commitOnRevoke && !offsets.isEmpty()) {
                try {
                    consumer.commitSync(offsets);
                    Json.emit(Json.obj("event", "committed", "offsets", offsets(offsets),
                            "where", "revoked"));
                } catch (KafkaException e) {
                    Json.emit(Json.obj("event", "error", "error", Conf.error(e),
                            "where", "revoked"));
                }
            }
            Json.emit(state("revoked", tps));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> tps) {
            Json.emit(state("assigned", tps));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> tps) {
            consumed.keySet().removeAll(tps);
            Json.emit(state("lost", tps));
        }
    };

    private void run(String topics, boolean pattern, long maxSeconds) {
        LinkedBlockingQueue<String> commands = Conf.stdinCommands();

        if (pattern) {
            consumer.subscribe(new SubscriptionPattern(topics), listener);
        } else {
            consumer.subscribe(Arrays.asList(topics.split(",")), listener);
        }
        Json.emit(Json.obj("event", "started"));
        long deadline = System.currentTimeMillis() + maxSeconds * 1000;
        while (System.currentTimeMillis() < deadline) {
            String cmd = commands.poll();
            if (cmd != null && !command(cmd)) {
                return;
            }
            try {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                if (!records.isEmpty()) {
                    report(records);
                    if (commitEachBatch) {
                        commitBatch(records);
                    }
                }
            } catch (FencedInstanceIdException | UnreleasedInstanceIdException
                    | UnsupportedVersionException e) {
                Json.emit(Json.obj("event", "error", "error", Conf.error(e), "fatal", true));
                return;
            } catch (KafkaException e) {
                Json.emit(Json.obj("event", "error", "error", Conf.error(e)));
            }
        }
        command("close");
    }

    private void commitBatch(ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : records.partitions()) {
            offsets.put(tp, new OffsetAndMetadata(consumed.get(tp)));
        }
        try {
            consumer.commitSync(offsets);
            Json.emit(Json.obj("event", "committed", "offsets", offsets(offsets),
                    "where", "batch"));
        } catch (KafkaException e) {
            Json.emit(Json.obj("event", "error", "error", Conf.error(e), "where", "batch"));
        }
    }

    private void report(ConsumerRecords<byte[], byte[]> records) {
        List<Object> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            consumed.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
            if (printRecords) {
                out.add(Records.read(r));
            }
        }
        Json.emit(Json.obj("event", "records", "count", records.count(),
                "records", printRecords ? out : null));
    }

    /** Run one command; false when the member is closed. */
    private boolean command(String cmd) {
        switch (cmd) {
            case "commit":
                try {
                    Map<TopicPartition, OffsetAndMetadata> offsets = positions(consumer.assignment());
                    consumer.commitSync(offsets);
                    Json.emit(Json.obj("event", "reply", "reply", cmd, "ok", true,
                            "offsets", offsets(offsets)));
                } catch (KafkaException e) {
                    Json.emit(Json.obj("event", "reply", "reply", cmd, "ok", false,
                            "error", Conf.error(e)));
                }
                return true;
            case "assignment":
                Map<String, Object> s = state("reply", null);
                s.put("reply", cmd);
                s.put("ok", true);
                Json.emit(s);
                return true;
            case "close":
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(20)));
                Json.emit(Json.obj("event", "closed"));
                return false;
            default:
                Json.emit(Json.obj("event", "reply", "reply", cmd, "ok", false,
                        "error", "unknown command"));
                return true;
        }
    }
}
