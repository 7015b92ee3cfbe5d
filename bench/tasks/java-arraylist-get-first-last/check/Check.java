public class Check {
    public static void main(String[] args) throws Exception {
        java.util.ArrayList<String> l = new java.util.ArrayList<>(java.util.List.of("a", "b", "c"));
        Checks.check("first", "a".equals(l.getFirst()));
        Checks.check("last", "c".equals(l.getLast()));
        boolean threw = false;
        try { new java.util.ArrayList<String>().getLast(); } catch (java.util.NoSuchElementException e) { threw = true; }
        Checks.check("empty throws", threw);
        Checks.done();
    }
}
