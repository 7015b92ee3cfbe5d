public class Check {
    public static void main(String[] args) throws Exception {
        java.util.StringJoiner j = new java.util.StringJoiner(", ", "[", "]");
        Checks.check("empty", j.length() == j.toString().length());
        j.add("a").add("bc");
        Checks.check("two items", j.length() == j.toString().length() && j.length() == 7);
        j.setEmptyValue("EMPTY");
        Checks.check("empty value", new java.util.StringJoiner("-", "<", ">").setEmptyValue("E").length() == 1);
        Checks.done();
    }
}
