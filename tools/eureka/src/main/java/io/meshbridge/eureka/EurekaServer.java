package io.meshbridge.eureka;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.netflix.eureka.server.EnableEurekaServer;

/**
 * A Eureka server as users run one: a Spring Boot application with
 * {@code @EnableEurekaServer}. Its port, peers and timers come from system
 * properties the harness sets (test/harness/eureka.go); application.properties
 * holds only what every run shares.
 */
@SpringBootApplication
@EnableEurekaServer
public class EurekaServer {
    public static void main(String[] args) {
        SpringApplication.run(EurekaServer.class, args);
    }
}
