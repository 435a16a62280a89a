package io.meshbridge.nacos;

import com.alibaba.nacos.NacosServerBasicApplication;
import com.alibaba.nacos.NacosServerWebApplication;
import com.alibaba.nacos.core.listener.startup.NacosStartUp;
import com.alibaba.nacos.core.listener.startup.NacosStartUpManager;
import com.alibaba.nacos.sys.env.DeploymentType;
import com.alibaba.nacos.sys.env.EnvUtil;
import org.springframework.boot.Banner;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Starts a Nacos 3.1 server without its console, as upstream's
 * com.alibaba.nacos.bootstrap.NacosBootstrap does for deployment type
 * "server" (that module is not on Maven Central): the core context, then the
 * server's web context (HTTP API and gRPC) as its child. Prints
 * "nacos server ready" once both run.
 */
public final class NacosServer {
    private NacosServer() {}

    public static void main(String[] args) {
        EnvUtil.setDeploymentType(DeploymentType.SERVER);
        NacosStartUpManager.start(NacosStartUp.CORE_START_UP_PHASE);
        ConfigurableApplicationContext core = new SpringApplicationBuilder(NacosServerBasicApplication.class)
                .web(WebApplicationType.NONE)
                .bannerMode(Banner.Mode.OFF)
                .run(args);
        NacosStartUpManager.start(NacosStartUp.WEB_START_UP_PHASE);
        new SpringApplicationBuilder(NacosServerWebApplication.class)
                .parent(core)
                .bannerMode(Banner.Mode.OFF)
                .run(args);
        System.out.println("nacos server ready");
    }
}
