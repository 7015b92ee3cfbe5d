public class Check {
    static int failed = 0;
    static void check(String what, boolean ok) {
        if (!ok) { failed++; System.err.println("FAIL " + what); }
    }
    public static void main(String[] args) throws Exception {
        java.util.ArrayList<String> l = new java.util.ArrayList<>(java.util.List.of("a", "b", "c"));
        check("first", "a".equals(l.getFirst()));
        check("last", "c".equals(l.getLast()));
        boolean threw = false;
        try { new java.util.ArrayList<String>().getLast(); } catch (java.util.NoSuchElementException e) { threw = true; }
        check("empty throws", threw);
        if (failed > 0) { System.exit(1); }
        System.out.println("all checks passed");
    }
}
