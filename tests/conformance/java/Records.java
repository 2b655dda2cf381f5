import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/** Records as JSON-ready maps (the same shape for what was sent and what was read). */
final class Records {
    private Records() {}

    static List<Object> headers(Headers hs) {
        List<Object> out = new ArrayList<>();
        for (Header h : hs) {
            out.add(java.util.Arrays.asList(h.key(), Json.text(h.value())));
        }
        return out;
    }

    static Map<String, Object> read(ConsumerRecord<byte[], byte[]> r) {
        return Json.obj("topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                "key", Json.text(r.key()), "value", Json.text(r.value()),
                "headers", headers(r.headers()));
    }
}
