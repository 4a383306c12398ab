import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.*;
import io.netty.channel.*;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.*;
import io.netty.util.CharsetUtil;
import io.netty.util.concurrent.DefaultEventExecutorGroup;
import io.netty.util.concurrent.EventExecutorGroup;
import com.google.common.base.*;
import com.google.common.cache.*;
import com.google.common.collect.*;
import java.util.*;
import java.util.regex.*;

// A Netty HTTP service for the servers test: NIO event loops, a 16-thread business executor, HTTP
// codec, aggregation and gzip, and a handler doing string work (query decoding, sorting, regex,
// Guava's Splitter, Joiner and LoadingCache, a small recursion). Usage: NettyServe PORT [WORKDIR]
public class NettyServe {
    static final Pattern WORD = Pattern.compile("([a-z]+)-(\\d+)");
    static final LoadingCache<String, String> CACHE = CacheBuilder.newBuilder().maximumSize(2000)
        .build(new CacheLoader<String, String>() { public String load(String k) { return render(k, 3); } });

    static String render(String key, int depth) {
        if (depth > 0) return render(key + "/" + depth, depth - 1);
        StringBuilder sb = new StringBuilder();
        TreeMap<String, Integer> counts = new TreeMap<>();
        for (String part : Splitter.on(CharMatcher.anyOf("/-_")).omitEmptyStrings().split(key)) {
            counts.merge(part.toLowerCase(Locale.ROOT), 1, Integer::sum);
        }
        for (Map.Entry<String, Integer> e : counts.entrySet()) {
            sb.append(String.format("%s=%d;", e.getKey(), e.getValue()));
        }
        return sb.toString();
    }

    static String handle(String uri) {
        QueryStringDecoder q = new QueryStringDecoder(uri);
        int n = 40;
        List<String> ids = q.parameters().getOrDefault("id", List.of("item-1"));
        StringBuilder json = new StringBuilder("{\"items\":[");
        Random r = new Random(uri.hashCode());
        List<String> words = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String w = "node" + r.nextInt(500) + "-" + (i * 7) + "_" + ids.get(0);
            words.add(w);
        }
        Collections.sort(words);
        for (String w : words) {
            Matcher m = WORD.matcher(w);
            String cached = CACHE.getUnchecked(w.substring(0, Math.min(12, w.length())));
            json.append("{\"w\":\"").append(w).append("\",\"m\":").append(m.find() ? m.group(2) : "null")
                .append(",\"c\":\"").append(cached).append("\",\"i\":").append(w.indexOf("_item")).append("},");
        }
        json.setLength(json.length() - 1);
        json.append("],\"joined\":\"").append(Joiner.on('|').join(Iterables.limit(words, 8))).append("\"}");
        return json.toString();
    }

    static class Handler extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            String body = handle(req.uri());
            ByteBuf buf = Unpooled.copiedBuffer(body, CharsetUtil.UTF_8);
            FullHttpResponse resp = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK, buf);
            resp.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/json");
            HttpUtil.setContentLength(resp, buf.readableBytes());
            HttpUtil.setKeepAlive(resp, HttpUtil.isKeepAlive(req));
            ctx.writeAndFlush(resp);
        }
        @Override public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();   // wrk resets its connections at the end
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int workers = 16;
        NioEventLoopGroup boss = new NioEventLoopGroup(1), io = new NioEventLoopGroup(4);
        EventExecutorGroup business = new DefaultEventExecutorGroup(workers);
        ServerBootstrap b = new ServerBootstrap().group(boss, io).channel(NioServerSocketChannel.class)
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(65536),
                        new HttpContentCompressor()).addLast(business, new Handler());
                }
            });
        Channel ch;
        try {
            ch = b.bind(port).sync().channel();
        } catch (Exception e) {   // the event loops' threads would keep the JVM up
            e.printStackTrace();
            System.exit(1);
            return;
        }
        // Port 0: the kernel's choice, for run-server.sh to read.
        System.out.println("listening " + ((java.net.InetSocketAddress) ch.localAddress()).getPort());
        ch.closeFuture().sync();
    }
}
