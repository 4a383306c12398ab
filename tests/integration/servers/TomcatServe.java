import jakarta.servlet.*;
import jakarta.servlet.http.*;
import org.apache.catalina.Context;
import org.apache.catalina.startup.Tomcat;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;
import java.io.*;
import java.lang.reflect.Method;
import java.util.*;
import java.util.regex.*;

// An embedded Tomcat for the servers test: its NIO connector and thread pool, six servlet filters,
// and a servlet that calls its controller through twelve interceptors and Method.invoke, as web
// frameworks do, building JSON from sorted, formatted strings. Usage: TomcatServe PORT BASEDIR
public class TomcatServe {
    // A framework-like dispatch: interceptors called reflectively around a controller method.
    public static class Controller {
        public String orders(Map<String, String> params) {
            StringBuilder sb = new StringBuilder("{\"orders\":[");
            Random r = new Random(params.getOrDefault("user", "x").hashCode());
            List<String> skus = new ArrayList<>();
            for (int i = 0; i < 30; i++) skus.add(String.format("SKU-%05d-%s", r.nextInt(99999), params.getOrDefault("region", "eu")));
            skus.sort(Comparator.naturalOrder());
            for (String s : skus) {
                sb.append("{\"sku\":\"").append(s).append("\",\"hash\":").append(s.hashCode())
                  .append(",\"pos\":").append(s.indexOf("-eu")).append("},");
            }
            sb.setLength(sb.length() - 1);
            return sb.append("]}").toString();
        }
    }
    interface Interceptor { String around(Iterator<Interceptor> rest, Method m, Object target, Map<String, String> p) throws Exception; }
    static final Pattern PARAM = Pattern.compile("([a-z]+)=([^&]*)");
    static final List<Interceptor> CHAIN = new ArrayList<>();
    static {
        for (int i = 0; i < 12; i++) {
            final int level = i;
            CHAIN.add((rest, m, t, p) -> {
                p.put("level" + level, Integer.toString(level));
                if (rest.hasNext()) return rest.next().around(rest, m, t, p);
                return (String) m.invoke(t, p);
            });
        }
    }
    public static class Api extends HttpServlet {
        final Controller controller = new Controller();
        final Method target;
        Api() throws Exception { target = Controller.class.getMethod("orders", Map.class); }
        @Override protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            Map<String, String> p = new TreeMap<>();
            String q = req.getQueryString();
            if (q != null) { Matcher m = PARAM.matcher(q); while (m.find()) p.put(m.group(1), m.group(2)); }
            try {
                Iterator<Interceptor> it = CHAIN.iterator();
                String body = it.next().around(it, target, controller, p);
                resp.setContentType("application/json");
                resp.getWriter().write(body);
            } catch (Exception e) { throw new IOException(e); }
        }
    }
    public static class Tag implements Filter {
        final String name; Tag(String n) { name = n; }
        public void doFilter(ServletRequest req, ServletResponse resp, FilterChain chain) throws IOException, ServletException {
            req.setAttribute(name, System.nanoTime());
            chain.doFilter(req, resp);
        }
    }
    public static void main(String[] args) throws Exception {
        Tomcat tomcat = new Tomcat();
        tomcat.setBaseDir(args[1]);
        tomcat.setPort(Integer.parseInt(args[0]));
        tomcat.getConnector();
        Context ctx = tomcat.addContext("", null);
        Tomcat.addServlet(ctx, "api", new Api());
        ctx.addServletMappingDecoded("/api/*", "api");
        for (int i = 0; i < 6; i++) {
            FilterDef def = new FilterDef();
            def.setFilterName("tag" + i); def.setFilter(new Tag("tag" + i));
            ctx.addFilterDef(def);
            FilterMap map = new FilterMap(); map.setFilterName("tag" + i); map.addURLPattern("/*");
            ctx.addFilterMap(map);
        }
        tomcat.start();
        // Port 0: the kernel's choice, for run-server.sh to read.
        System.out.println("listening " + tomcat.getConnector().getLocalPort());
        tomcat.getServer().await();
    }
}
