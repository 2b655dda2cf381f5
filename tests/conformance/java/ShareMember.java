import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A member of a KIP-932 share group (KafkaShareConsumer). Usage:
 *   ShareMember BOOTSTRAP GROUP TOPICS [key=value consumer config...] [driver.x=y...]
 * Driver options: driver.first=accept|release|reject (explicit mode: how a record delivered
 * for the first time is acknowledged; a redelivered one is always accepted; needs
 * share.acknowledgement.mode=explicit), driver.maxSeconds=N (exit bound).
 *
 * Events on stdout, one JSON object per line: started, records (each [partition, offset,
 * value, delivery count]), committed (explicit mode), error, closed. Commands on stdin:
 * "close". End of stdin closes too.
 */
public final class ShareMember {
    private final KafkaShareConsumer<byte[], byte[]> consumer;
    private final boolean explicit;
    private final AcknowledgeType first;

    private ShareMember(Properties props, String first) {
        this.consumer = new KafkaShareConsumer<>(props, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
        this.explicit = "explicit".equals(props.getProperty("share.acknowledgement.mode"));
        this.first = AcknowledgeType.valueOf(first.toUpperCase());
    }

    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        p.putAll(Conf.client(args, 3));
        ShareMember m = new ShareMember(p, Conf.driver(args, 3, "first", "accept"));
        m.run(args[2], Long.parseLong(Conf.driver(args, 3, "maxSeconds", "170")));
    }

    private void run(String topics, long maxSeconds) {
        LinkedBlockingQueue<String> commands = Conf.stdinCommands();
        consumer.subscribe(Arrays.asList(topics.split(",")));
        Json.emit(Json.obj("event", "started"));
        long deadline = System.currentTimeMillis() + maxSeconds * 1000;
        while (System.currentTimeMillis() < deadline) {
            String cmd = commands.poll();
            if ("close".equals(cmd)) {
                break;
            }
            try {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                if (!records.isEmpty()) {
                    report(records);
                }
            } catch (KafkaException e) {
                Json.emit(Json.obj("event", "error", "error", Conf.error(e)));
            }
        }
        consumer.close(Duration.ofSeconds(20));
        Json.emit(Json.obj("event", "closed"));
    }

    private void report(ConsumerRecords<byte[], byte[]> records) {
        List<Object> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            int count = r.deliveryCount().map(Short::intValue).orElse(-1);
            out.add(List.of(r.partition(), r.offset(), Json.text(r.value()), count));
            if (explicit) {
                consumer.acknowledge(r, count <= 1 ? first : AcknowledgeType.ACCEPT);
            }
        }
        Json.emit(Json.obj("event", "records", "records", out));
        if (explicit) {
            consumer.commitSync(Duration.ofSeconds(10));
            Json.emit(Json.obj("event", "committed"));
        }
    }
}
