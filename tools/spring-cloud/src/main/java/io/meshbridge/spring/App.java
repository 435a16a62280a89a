package io.meshbridge.spring;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * A Spring Cloud web application as users write one: it serves GET / with
 * "spring NAME@PORT" and registers itself through whichever discovery client
 * the run enables (application.properties turns every one off; the harness
 * turns one on: spring.cloud.nacos.discovery.enabled,
 * spring.cloud.consul.discovery.enabled, eureka.client.enabled or
 * spring.cloud.zookeeper.discovery.enabled).
 */
@SpringBootApplication
@RestController
public class App {
    @Value("${spring.application.name}")
    private String name;

    @Value("${server.port}")
    private String port;

    @GetMapping("/")
    public String whoami() {
        return "spring " + name + "@" + port;
    }

    public static void main(String[] args) {
        SpringApplication.run(App.class, args);
    }
}
