public class Check {
    static int failed = 0;
    static void check(String what, boolean ok) {
        if (!ok) { failed++; System.err.println("FAIL " + what); }
    }
    public static void main(String[] args) throws Exception {
        check("days are date based", java.time.temporal.ChronoUnit.DAYS.isDateBased());
        check("forever is neither", !java.time.temporal.ChronoUnit.FOREVER.isDateBased() && !java.time.temporal.ChronoUnit.FOREVER.isTimeBased());
        check("hours are time based", java.time.temporal.ChronoUnit.HOURS.isTimeBased());
        check("supported", java.time.temporal.ChronoUnit.DAYS.isSupportedBy(java.time.LocalDate.of(2020, 1, 1)));
        if (failed > 0) { System.exit(1); }
        System.out.println("all checks passed");
    }
}
