import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An idempotent producer per job. Usage:
 *   Produce BOOTSTRAP COUNT TOPIC:CODEC:PARTITIONS... [key=value producer config...]
 * Each job sends COUNT records (record i to partition i % PARTITIONS, some null keys, values
 * and headers) with compression.type=CODEC, then prints every record it sent, with the
 * offset the broker acknowledged, as {"event":"sent",...}; finally {"event":"done"}.
 */
public final class Produce {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int count = Integer.parseInt(args[1]);
        try {
            for (int i = 2; i < args.length; i++) {
                if (!args[i].contains("=")) {
                    String[] job = args[i].split(":");
                    run(bootstrap, count, job[0], job[1], Integer.parseInt(job[2]),
                            Conf.client(args, 2));
                }
            }
            Json.emit(Json.obj("event", "done"));
        } catch (Exception e) {
            Json.emit(Json.obj("event", "error", "error", Conf.error(e)));
            System.exit(1);
        }
    }

    static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static void run(String bootstrap, int count, String topic, String codec, int partitions,
                    Properties extra) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.putAll(extra);
        List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(
                p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < count; i++) {
                String key = i % 7 == 6 ? null : "key-" + i;
                String value = i % 11 == 10 ? null : codec + "-" + i + "-" + "abc".repeat(i % 40);
                List<Header> headers = new ArrayList<>();
                if (i % 5 != 0) {
                    headers.add(new RecordHeader("idx", bytes(Integer.toString(i))));
                    headers.add(new RecordHeader("codec", bytes(codec)));
                }
                if (i % 3 == 0) {
                    headers.add(new RecordHeader("nothing", null));
                }
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(
                        topic, i % partitions, null, bytes(key), bytes(value), headers);
                sent.add(r);
                Future<RecordMetadata> ack = producer.send(r);
                if (ack.isDone()) {
                    ack.get(); // fail at the first record the producer could not even send
                }
                acks.add(ack);
            }
            producer.flush();
            for (int i = 0; i < sent.size(); i++) {
                ProducerRecord<byte[], byte[]> r = sent.get(i);
                RecordMetadata md = acks.get(i).get();
                Json.emit(Json.obj("event", "sent", "topic", r.topic(), "partition", md.partition(),
                        "offset", md.offset(), "key", Json.text(r.key()),
                        "value", Json.text(r.value()), "headers", Records.headers(r.headers())));
            }
        }
    }
}
