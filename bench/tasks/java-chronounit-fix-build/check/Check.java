public class Check {
    public static void main(String[] args) throws Exception {
        Checks.check("days are date based", java.time.temporal.ChronoUnit.DAYS.isDateBased());
        Checks.check("forever is neither", !java.time.temporal.ChronoUnit.FOREVER.isDateBased() && !java.time.temporal.ChronoUnit.FOREVER.isTimeBased());
        Checks.check("hours are time based", java.time.temporal.ChronoUnit.HOURS.isTimeBased());
        Checks.check("supported", java.time.temporal.ChronoUnit.DAYS.isSupportedBy(java.time.LocalDate.of(2020, 1, 1)));
        Checks.done();
    }
}
