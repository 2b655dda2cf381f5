import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The rate of a group of consumers in one JVM, for benchmarks/share.py (not a test). Usage:
 *   GroupRate BOOTSTRAP GROUP TOPIC share|consumer MEMBERS TOTAL [key=value consumer config...]
 * MEMBERS threads each run a KafkaShareConsumer (implicit acknowledgement) or a KafkaConsumer
 * (group.protocol=consumer, earliest) until TOTAL records came in all. Prints one JSON line:
 * records/s and the JVM's CPU seconds per second, from the first record to the last.
 */
public final class GroupRate {
    private static final AtomicLong SEEN = new AtomicLong();
    private static volatile long firstNs;
    private static volatile long firstCpu;
    private static volatile long lastNs;
    private static volatile long lastCpu;

    public static void main(String[] args) throws Exception {
        String kind = args[3];
        int members = Integer.parseInt(args[4]);
        long total = Long.parseLong(args[5]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        if (!"share".equals(kind)) {
            p.put("group.protocol", "consumer");
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        }
        p.putAll(Conf.client(args, 6));
        Thread[] threads = new Thread[members];
        for (int i = 0; i < members; i++) {
            threads[i] = new Thread(() -> member(kind, p, args[2], total));
            threads[i].start();
        }
        for (Thread t : threads) {
            t.join(300_000);
        }
        double secs = (lastNs - firstNs) / 1e9;
        Json.emit(Json.obj("event", "done", "records", SEEN.get(), "rate", total / secs,
                "cpu", (lastCpu - firstCpu) / 1e9 / secs));
        System.exit(0);
    }

    private static long cpu() {
        return ((com.sun.management.OperatingSystemMXBean)
                ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    private static void count(int n, long total) {
        if (n == 0) {
            return;
        }
        synchronized (SEEN) {
            if (firstNs == 0) {
                firstNs = System.nanoTime();
                firstCpu = cpu();
            }
            if (SEEN.addAndGet(n) >= total && lastNs == 0) {
                lastNs = System.nanoTime();
                lastCpu = cpu();
            }
        }
    }

    private static void member(String kind, Properties p, String topic, long total) {
        ByteArrayDeserializer d = new ByteArrayDeserializer();
        if ("share".equals(kind)) {
            try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p, d, d)) {
                c.subscribe(List.of(topic));
                while (SEEN.get() < total) {
                    count(c.poll(Duration.ofMillis(500)).count(), total);
                }
            }
        } else {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, d, d)) {
                c.subscribe(List.of(topic));
                while (SEEN.get() < total) {
                    count(c.poll(Duration.ofMillis(500)).count(), total);
                }
            }
        }
    }
}
