/** What every JDK task's Check.java uses: checks that count failures. */
public class Checks {
    static int failed = 0;

    static void check(String what, boolean ok) {
        if (!ok) {
            failed++;
            System.err.println("FAIL " + what);
        }
    }

    static void done() {
        if (failed > 0) {
            System.exit(1);
        }
        System.out.println("all checks passed");
    }
}
