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
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A classic consumer-group member. Usage:
 *   Member BOOTSTRAP GROUP TOPIC[,TOPIC...] [key=value consumer config...] [driver.x=y...]
 * Driver options: driver.commitOnRevoke=true (commitSync the positions of revoked partitions
 * inside onPartitionsRevoked), driver.records=false (print counts instead of records).
 *
 * Events on stdout (one JSON object per line): started, assigned / revoked / lost (with the
 * partitions, the whole assignment, generation, member id and wall clock), committed, records,
 * error, reply (to a command), closed. Commands on stdin, one per line: "commit" (commitSync of the
 * positions), "assignment", "close" (close() and exit). End of stdin closes too.
 */
public final class Member {
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final boolean commitOnRevoke;
    private final boolean printRecords;

    private Member(Properties props, boolean commitOnRevoke, boolean printRecords) {
        this.consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
        this.commitOnRevoke = commitOnRevoke;
        this.printRecords = printRecords;
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(Conf.client(args, 3));
        Member m = new Member(p, Boolean.parseBoolean(Conf.driver(args, 3, "commitOnRevoke", "false")),
                Boolean.parseBoolean(Conf.driver(args, 3, "records", "true")));
        m.run(Arrays.asList(args[2].split(",")),
                Long.parseLong(Conf.driver(args, 3, "maxSeconds", "170")));
    }

    private Map<String, Object> state(String event, Collection<TopicPartition> tps) {
        return Json.obj("event", event, "partitions", tps == null ? null : Json.tps(tps),
                "assignment", Json.tps(consumer.assignment()),
                "generation", consumer.groupMetadata().generationId(),
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
            if (commitOnRevoke && !tps.isEmpty()) {
                Map<TopicPartition, OffsetAndMetadata> offsets = positions(tps);
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
            Json.emit(state("lost", tps));
        }
    };

    private void run(List<String> topics, long maxSeconds) {
        LinkedBlockingQueue<String> commands = Conf.stdinCommands();

        consumer.subscribe(topics, listener);
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
                }
            } catch (FencedInstanceIdException e) {
                Json.emit(Json.obj("event", "error", "error", Conf.error(e), "fatal", true));
                return;
            } catch (KafkaException e) {
                Json.emit(Json.obj("event", "error", "error", Conf.error(e)));
            }
        }
        command("close");
    }

    private void report(ConsumerRecords<byte[], byte[]> records) {
        List<Object> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
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
