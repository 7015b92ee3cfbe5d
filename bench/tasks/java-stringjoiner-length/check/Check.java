public class Check {
    static int failed = 0;
    static void check(String what, boolean ok) {
        if (!ok) { failed++; System.err.println("FAIL " + what); }
    }
    public static void main(String[] args) throws Exception {
        java.util.StringJoiner j = new java.util.StringJoiner(", ", "[", "]");
        check("empty", j.length() == j.toString().length());
        j.add("a").add("bc");
        check("two items", j.length() == j.toString().length() && j.length() == 7);
        j.setEmptyValue("EMPTY");
        check("empty value", new java.util.StringJoiner("-", "<", ">").setEmptyValue("E").length() == 1);
        if (failed > 0) { System.exit(1); }
        System.out.println("all checks passed");
    }
}
