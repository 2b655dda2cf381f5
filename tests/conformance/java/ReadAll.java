import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Read every partition of some topics from the beginning to their end offsets, without a
 * group. Usage: ReadAll BOOTSTRAP TOPIC... [key=value consumer config...]
 * Prints {"event":"record",...} per record in the order polled, then {"event":"done"}.
 */
public final class ReadAll {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.putAll(Conf.client(args, 1));
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(
                p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 1; i < args.length; i++) {
                if (!args[i].contains("=")) {
                    for (PartitionInfo info : c.partitionsFor(args[i], Duration.ofSeconds(30))) {
                        tps.add(new TopicPartition(info.topic(), info.partition()));
                    }
                }
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.currentTimeMillis() + 60_000;
            while (!reached(c, ends)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("end offsets " + ends + " not reached");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    Map<String, Object> event = Records.read(r);
                    event.put("event", "record");
                    Json.emit(event);
                }
            }
            Json.emit(Json.obj("event", "done"));
        } catch (Exception e) {
            Json.emit(Json.obj("event", "error", "error", Conf.error(e)));
            System.exit(1);
        }
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> c,
                                   Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
