import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer driven by commands on stdin, one per line. Usage:
 *   Txn BOOTSTRAP TRANSACTIONAL_ID [key=value producer config...]
 * initTransactions() runs first ({"event":"ready"}). Commands: "begin"; "send TOPIC PARTITION
 * VALUE" (waits for the ack: the reply has the offset); "offsets GROUP TOPIC PARTITION
 * OFFSET" (sendOffsetsToTransaction with the group's metadata, no member); "commit";
 * "abort"; "exit". Each reply is {"reply":CMD,"ok":bool[,"error":"Class: message"]}.
 */
public final class Txn {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[1]);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.putAll(Conf.client(args, 2));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(
                     p, new StringSerializer(), new StringSerializer());
             BufferedReader in = new BufferedReader(
                     new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            producer.initTransactions();
            Json.emit(Json.obj("event", "ready"));
            String line;
            while ((line = in.readLine()) != null) {
                List<String> w = Arrays.asList(line.trim().split("\\s+"));
                String name = w.get(0);
                if (name.equals("exit")) {
                    break;
                }
                Map<String, Object> reply = Json.obj("reply", name, "ok", true);
                try {
                    switch (name) {
                        case "begin" -> producer.beginTransaction();
                        case "send" -> {
                            RecordMetadata md = producer.send(new ProducerRecord<>(
                                    w.get(1), Integer.parseInt(w.get(2)), null, w.get(3)))
                                    .get(15, TimeUnit.SECONDS);
                            reply.put("offset", md.offset());
                        }
                        case "offsets" -> producer.sendOffsetsToTransaction(
                                Map.of(new TopicPartition(w.get(2), Integer.parseInt(w.get(3))),
                                        new OffsetAndMetadata(Long.parseLong(w.get(4)))),
                                new ConsumerGroupMetadata(w.get(1)));
                        case "commit" -> producer.commitTransaction();
                        case "abort" -> producer.abortTransaction();
                        default -> throw new IllegalArgumentException("unknown command " + name);
                    }
                } catch (Exception e) {
                    reply.put("ok", false);
                    reply.put("error", Conf.error(e));
                }
                Json.emit(reply);
            }
        } catch (Exception e) {
            Json.emit(Json.obj("event", "error", "error", Conf.error(e)));
            System.exit(1);
        }
    }
}
