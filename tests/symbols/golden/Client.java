package pay;

import java.util.List;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

public class Client {
    private int retries = 3;

    public Client(int retries) {
        this.retries = retries;
    }

    public int Charge(int a, int b) {
        return a + b;
    }

    public int Charge(String card) {
        return 0;
    }

    @Override
    public String toString() {
        return "Client";
    }

    interface Listener {
        void on(List<String> events);
    }

    enum State {
        OPEN, CLOSED;

        boolean open() {
            return this == OPEN;
        }
    }
}

class ClientTest {
    @Test
    void charges() {}

    @Test
    @Disabled("slow")
    void chargesLater() {}
}
