public class Check {
    public static void main(String[] args) throws Exception {
        java.util.concurrent.atomic.LongAdder a = new java.util.concurrent.atomic.LongAdder();
        Thread[] ts = new Thread[4];
        for (int i = 0; i < ts.length; i++) { ts[i] = new Thread(() -> { for (int k = 0; k < 10000; k++) a.increment(); }); ts[i].start(); }
        for (Thread t : ts) t.join();
        Checks.check("adds up", a.sum() == 40000);
        java.util.concurrent.atomic.DoubleAccumulator m = new java.util.concurrent.atomic.DoubleAccumulator(Math::max, 0);
        m.accumulate(3.5); m.accumulate(1.0);
        Checks.check("accumulates", m.get() == 3.5);
        Checks.done();
    }
}
